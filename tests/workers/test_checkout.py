"""Mirrors and worktrees against real git repositories in a temp dir."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.sample_repo import GOOD_KERNEL, build_history, commit, git, init

from roofwatch.common.errors import RemoteUnreachable, UnknownRevision
from roofwatch.git import checkout


@pytest.fixture
def source(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    repo = tmp_path / "source"
    return repo, build_history(repo)


@pytest.fixture
def mirrors(tmp_path: Path) -> Path:
    return tmp_path / "data" / "mirrors"


def test_mirror_of_a_local_path_has_every_commit(source: tuple[Path, dict[str, str]], mirrors: Path) -> None:
    repo, shas = source
    mirror = checkout.ensure_mirror(mirrors, str(repo))

    assert mirror.parent == mirrors
    assert mirror.name.startswith("source-") and mirror.name.endswith(".git")
    assert git(mirror, "rev-parse", "--is-bare-repository") == "true"
    assert checkout.resolve(mirror, "main") == shas["fixed"]
    assert all(checkout.has_commit(mirror, sha) for sha in shas.values())


def test_second_ensure_mirror_fetches_into_the_same_mirror(
    source: tuple[Path, dict[str, str]], mirrors: Path
) -> None:
    repo, _ = source
    mirror = checkout.ensure_mirror(mirrors, str(repo))
    # A file git never touches shows that the mirror was updated in place, not cloned afresh.
    (mirror / "roofwatch-marker").write_text("kept")
    new = commit(repo, "Tune saxpy", {"kernel.py": GOOD_KERNEL + "\n# tuned\n"}, 4)
    assert not checkout.has_commit(mirror, new)

    assert checkout.ensure_mirror(mirrors, str(repo)) == mirror
    assert (mirror / "roofwatch-marker").read_text() == "kept"
    assert checkout.resolve(mirror, "main") == new
    assert list(mirrors.glob("*.git")) == [mirror]


def test_a_mirror_that_holds_the_commit_is_not_fetched_again(
    source: tuple[Path, dict[str, str]], mirrors: Path
) -> None:
    repo, shas = source
    mirror = checkout.ensure_mirror(mirrors, str(repo))
    new = commit(repo, "Tune saxpy", {"kernel.py": GOOD_KERNEL + "\n# tuned\n"}, 4)
    # It holds the commit asked for: nothing is fetched, so the newer commit is still not there.
    assert checkout.mirror_holding(mirrors, str(repo), shas["fixed"]) == mirror
    assert not checkout.has_commit(mirror, new)
    # It lacks the commit asked for: fetched.
    assert checkout.mirror_holding(mirrors, str(repo), new) == mirror
    assert checkout.has_commit(mirror, new)
    # No mirror yet: cloned.
    other = mirrors.parent / "elsewhere"
    assert checkout.has_commit(checkout.mirror_holding(other, str(repo), new), new)
    assert list(other.glob("*.git"))


def test_same_source_spelled_differently_shares_a_mirror(
    source: tuple[Path, dict[str, str]], mirrors: Path
) -> None:
    repo, _ = source
    assert checkout.mirror_path(mirrors, str(repo)) == checkout.mirror_path(mirrors, str(repo / ".." / "source"))
    assert checkout.mirror_path(mirrors, "https://a/x.git") != checkout.mirror_path(mirrors, "https://b/x.git")


def test_unknown_revision(source: tuple[Path, dict[str, str]], mirrors: Path) -> None:
    repo, _ = source
    mirror = checkout.ensure_mirror(mirrors, str(repo))
    with pytest.raises(UnknownRevision, match="unknown revision"):
        checkout.resolve(mirror, "0123456789abcdef0123456789abcdef01234567")
    with pytest.raises(UnknownRevision):
        checkout.resolve(mirror, "no-such-branch")
    assert not checkout.has_commit(mirror, "0" * 40)


def test_worktree_at_exact_sha_is_removed_afterwards(
    source: tuple[Path, dict[str, str]], tmp_path: Path, mirrors: Path
) -> None:
    repo, shas = source
    mirror = checkout.ensure_mirror(mirrors, str(repo))
    worktrees = tmp_path / "data" / "worktrees"

    with checkout.worktree(mirror, shas["broken"], worktrees) as tree:
        assert tree.parent == worktrees
        assert git(tree, "rev-parse", "HEAD") == shas["broken"]
        assert "a * x - y" in (tree / "kernel.py").read_text()
        assert (tree / "checks" / "test_kernel.py").is_file()
        assert str(tree) in git(mirror, "worktree", "list")

    assert not tree.exists()
    assert str(tree) not in git(mirror, "worktree", "list")
    assert list(worktrees.iterdir()) == []


def test_worktree_is_removed_when_the_body_raises(
    source: tuple[Path, dict[str, str]], tmp_path: Path, mirrors: Path
) -> None:
    repo, shas = source
    mirror = checkout.ensure_mirror(mirrors, str(repo))
    with pytest.raises(RuntimeError), checkout.worktree(mirror, shas["good"], tmp_path / "wt") as tree:
        raise RuntimeError("suite blew up")
    assert not tree.exists()
    assert git(mirror, "worktree", "list").count("\n") == 0  # only the bare mirror itself


def test_worktree_of_unknown_sha(source: tuple[Path, dict[str, str]], tmp_path: Path, mirrors: Path) -> None:
    repo, _ = source
    mirror = checkout.ensure_mirror(mirrors, str(repo))
    with pytest.raises(UnknownRevision, match="was it pushed"), checkout.worktree(mirror, "f" * 40, tmp_path / "wt"):
        pass


def test_rewritten_history_is_fetched(source: tuple[Path, dict[str, str]], mirrors: Path) -> None:
    repo, shas = source
    mirror = checkout.ensure_mirror(mirrors, str(repo))
    git(repo, "reset", "--hard", "HEAD~1")
    rewritten = commit(repo, "Fix saxpy sign, properly", {"kernel.py": GOOD_KERNEL + "\n# v2\n"}, 5)

    checkout.ensure_mirror(mirrors, str(repo))

    assert rewritten != shas["fixed"]
    assert checkout.resolve(mirror, "main") == rewritten
    assert checkout.commit_info(mirror, rewritten).parents == [shas["broken"]]
    assert checkout.recent(mirror, "main", 3) == [shas["good"], shas["broken"], rewritten]


def test_deleted_branch_is_pruned(source: tuple[Path, dict[str, str]], mirrors: Path) -> None:
    repo, shas = source
    git(repo, "branch", "feature", shas["good"])
    mirror = checkout.ensure_mirror(mirrors, str(repo))
    assert checkout.resolve(mirror, "feature") == shas["good"]

    git(repo, "branch", "-D", "feature")
    checkout.ensure_mirror(mirrors, str(repo))
    with pytest.raises(UnknownRevision):
        checkout.resolve(mirror, "feature")


@pytest.mark.parametrize("url", ["file:///nonexistent/repo.git", "/nonexistent/repo"])
def test_unreachable_remote(url: str, mirrors: Path) -> None:
    with pytest.raises(RemoteUnreachable, match="cannot fetch"):
        checkout.ensure_mirror(mirrors, url)


def test_not_a_repository_is_unreachable(tmp_path: Path, mirrors: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(RemoteUnreachable):
        checkout.ensure_mirror(mirrors, str(plain))


def test_rev_range_and_recent_are_oldest_first(source: tuple[Path, dict[str, str]], mirrors: Path) -> None:
    repo, shas = source
    mirror = checkout.ensure_mirror(mirrors, str(repo))
    good, broken, fixed = shas["good"], shas["broken"], shas["fixed"]

    assert checkout.rev_range(mirror, f"{good}..{fixed}") == [broken, fixed]
    assert checkout.rev_range(mirror, f"{good[:10]}..") == [broken, fixed]
    assert checkout.rev_range(mirror, f"{fixed}..{fixed}") == []
    assert checkout.recent(mirror, "main", 2) == [broken, fixed]
    assert checkout.recent(mirror, broken, 10) == [good, broken]
    with pytest.raises(UnknownRevision, match="A..B"):
        checkout.rev_range(mirror, good)
    with pytest.raises(UnknownRevision):
        checkout.rev_range(mirror, f"{good}..nope")


def test_rev_range_follows_first_parents(tmp_path: Path, mirrors: Path) -> None:
    repo = tmp_path / "merges"
    init(repo)
    base = commit(repo, "base", {"a.txt": "a"}, 1)
    git(repo, "checkout", "-q", "-b", "topic")
    side = commit(repo, "side work", {"b.txt": "b"}, 2)
    git(repo, "checkout", "-q", "main")
    main_work = commit(repo, "main work", {"c.txt": "c"}, 3)
    git(repo, "merge", "-q", "--no-ff", "-m", "merge topic", "topic")
    merge = git(repo, "rev-parse", "HEAD")
    mirror = checkout.ensure_mirror(mirrors, str(repo))

    assert checkout.rev_range(mirror, f"{base}..main") == [main_work, merge]
    assert side not in checkout.recent(mirror, "main", 10)


def _merged_history(repo: Path) -> dict[str, str]:
    """main: base, main work, merge of topic (with side work); feature: off main work; main is checked out."""
    init(repo)
    shas = {"base": commit(repo, "base", {"a.txt": "a"}, 1)}
    git(repo, "checkout", "-q", "-b", "topic")
    shas["side"] = commit(repo, "side work", {"b.txt": "b"}, 2)
    git(repo, "checkout", "-q", "main")
    shas["main_work"] = commit(repo, "main work", {"c.txt": "c"}, 3)
    git(repo, "merge", "-q", "--no-ff", "-m", "merge topic", "topic")
    shas["merge"] = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "feature", shas["main_work"])
    shas["feature"] = commit(repo, "feature work", {"d.txt": "d"}, 4)
    git(repo, "tag", "v-feature")
    git(repo, "checkout", "-q", "main")
    return shas


def test_only_the_default_branchs_first_parent_history_is_on_it(tmp_path: Path, mirrors: Path) -> None:
    repo = tmp_path / "merges"
    shas = _merged_history(repo)
    mirror = checkout.ensure_mirror(mirrors, str(repo))
    default = checkout.default_branch(mirror, "HEAD", source=repo)
    assert default is not None and default.name == "main" and default.tips == (shas["merge"],)
    positions = {sha: checkout.commit_info(mirror, sha).position for sha in shas.values()}
    assert positions[shas["feature"]] == positions[shas["merge"]]  # a sibling at the same place
    on = checkout.on_first_parent_history(mirror, default.tips, positions)
    # A commit merged in from a branch (a second parent) is not on it, as the history's order never counts it.
    assert on == {shas["base"], shas["main_work"], shas["merge"]}
    assert checkout.on_first_parent_history(mirror, default.tips, {}) == set()

    assert checkout.branch_of(repo, shas["feature"]) == "feature, v-feature"
    assert checkout.branch_of(repo, shas["feature"], asked=["v-feature"]) == "v-feature"
    assert checkout.branch_of(repo, shas["side"], asked=["HEAD"]) == "main"  # HEAD is main, which merged it
    # The default branch merged it in, but only topic has it on its own history: that is its branch.
    assert checkout.branch_of(repo, shas["side"], asked=["HEAD"], besides=["main"]) == "topic"
    git(repo, "checkout", "-q", "feature")
    assert checkout.branch_of(repo, shas["feature"], asked=["HEAD"]) == "feature"  # what the user is on
    git(repo, "checkout", "-q", "--detach", shas["feature"])
    git(repo, "branch", "-q", "-D", "feature")
    git(repo, "tag", "-d", "v-feature")
    assert checkout.branch_of(repo, shas["feature"], asked=["HEAD"]) == ""  # nothing holds it


def test_the_default_branch_is_what_the_repository_says_never_the_checked_out_branch(
        tmp_path: Path, mirrors: Path) -> None:
    upstream = tmp_path / "upstream"
    init(upstream)
    first = commit(upstream, "first", {"a.txt": "a"}, 1)
    git(upstream, "branch", "-m", "main", "trunk")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(upstream), str(clone))
    git(clone, "checkout", "-q", "-b", "mine")
    mine = commit(clone, "mine", {"b.txt": "b"}, 2)
    mirror = checkout.ensure_mirror(mirrors, str(clone))
    assert checkout.default_branch(mirror, "HEAD")  # the mirror's HEAD is the branch the clone had checked out …
    default = checkout.default_branch(mirror, "HEAD", source=clone)  # … its origin/HEAD says trunk
    assert default is not None and default.name == "trunk" and set(default.tips) == {first}
    assert checkout.on_first_parent_history(mirror, default.tips, {first: 1, mine: 2}) == {first}
    registered = checkout.default_branch(mirror, "mine", source=clone)  # a registration's name wins when it exists
    assert registered is not None and registered.name == "mine" and registered.tips == (mine,)
    unknown = checkout.default_branch(mirror, "develop", source=clone)
    assert unknown is not None and unknown.name == "trunk"

    bare = tmp_path / "bare"
    init(bare)
    commit(bare, "only", {"a.txt": "a"}, 1)
    git(bare, "branch", "-m", "main", "work")
    only = checkout.default_branch(checkout.ensure_mirror(mirrors, str(bare)), "HEAD", source=bare)
    assert only is not None and only.name == "work"  # no origin, no main or master: the only branch
    git(bare, "checkout", "-q", "-b", "second")
    assert checkout.default_branch(checkout.ensure_mirror(mirrors, str(bare)), "HEAD", source=bare) is None


def test_commit_info(source: tuple[Path, dict[str, str]], mirrors: Path) -> None:
    repo, shas = source
    mirror = checkout.ensure_mirror(mirrors, str(repo))
    info = checkout.commit_info(mirror, shas["broken"])

    assert info.sha == shas["broken"]
    assert info.parents == [shas["good"]]
    assert info.author == "Kernel Dev <dev@example.com>"
    assert info.message == "Fuse saxpy (wrong sign)"
    assert info.committed_at.timestamp() == 1_700_000_000 + 2 * 60


def _measure_in_parallel(args: tuple[str, str, str, str]) -> tuple[str, str]:
    """One worker process: mirror (clone or fetch), check one SHA out, read it back."""
    mirrors_dir, worktrees_dir, source, sha = args
    mirror = checkout.ensure_mirror(Path(mirrors_dir), source)
    with checkout.worktree(mirror, sha, Path(worktrees_dir)) as tree:
        return sha, git(tree, "rev-parse", "HEAD")


def test_concurrent_runs_of_one_repository_share_the_mirror_safely(
        source: tuple[Path, dict[str, str]], mirrors: Path, tmp_path: Path) -> None:
    from concurrent.futures import ProcessPoolExecutor

    repo, shas = source
    jobs = [(str(mirrors), str(tmp_path / "worktrees"), str(repo), sha) for sha in list(shas.values()) * 3]
    with ProcessPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(_measure_in_parallel, jobs))

    assert all(sha == head for sha, head in results)
    assert [p.name for p in mirrors.glob("*.git")] == [checkout.mirror_path(mirrors, str(repo)).name]
    assert list((tmp_path / "worktrees").iterdir()) == []
    assert git(checkout.mirror_path(mirrors, str(repo)), "worktree", "list").count("\n") == 0
