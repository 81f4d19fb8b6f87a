"""A bare mirror per repository, fetched incrementally, and a detached worktree per run.

Mirrors live under ``<data dir>/mirrors``; a file lock per mirror keeps concurrent runs of
one repository on one host from fetching over each other.

Git itself is hardened, because the URLs, revisions and repositories it handles come from
outside: it runs with an empty HOME and no system config (the operator's ``~/.gitconfig``
never applies), hooks point at an empty folder (a hook planted in a mirror never runs),
only https, ssh and (for local paths) file transports are allowed, every user-supplied
argument comes after ``--`` or ``--end-of-options``, and credentials in a clone URL travel
in the environment as an HTTP header, never in argv, the mirror's config or an error.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from roofwatch.common.errors import CheckoutError, RemoteUnreachable, UnknownRevision
from roofwatch.common.redaction import redact, split_credentials

GIT_TIMEOUT_S = 600
# Empty on purpose: git's HOME and hooks folder.
# Transports git may use for a remote (protocol.<name>.allow); file only for local paths.
_ALLOWED_SCHEMES = {"https": "always", "ssh": "always"}
NEUTRAL_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / f"roofwatch-git-neutral-{os.getuid()}"


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    parents: list[str]
    author: str
    message: str
    committed_at: datetime
    # How many commits its first-parent chain holds, itself included: its place on the branch.
    # History is ordered by this, never by committer dates, which rebases and "Rebase and
    # merge" make equal or send backwards.
    position: int


def _neutral_dir() -> Path:
    NEUTRAL_DIR.mkdir(mode=0o755, exist_ok=True)
    for stray in NEUTRAL_DIR.iterdir():  # nobody should write here; if someone did, it goes
        shutil.rmtree(stray, ignore_errors=True) if stray.is_dir() else stray.unlink(missing_ok=True)
    return NEUTRAL_DIR


def git(*args: str, cwd: Path | None = None, timeout: float = GIT_TIMEOUT_S, local_files: bool = False,
        credentials: str | None = None) -> str:
    """Run hardened git and return stdout; a failure raises ``CheckoutError`` with git's own words.

    ``local_files`` allows the file transport (a local path as the source); ``credentials``
    (``user:password`` from a clone URL) become an Authorization header in the environment.
    """
    neutral = _neutral_dir()
    settings = {"core.hooksPath": str(neutral), "protocol.allow": "never", "core.fsmonitor": "false",
                "credential.helper": "", "protocol.file.allow": "always" if local_files else "never"}
    settings |= {f"protocol.{scheme}.allow": rule for scheme, rule in _ALLOWED_SCHEMES.items()}
    if credentials:
        token = base64.b64encode(credentials.encode()).decode()
        settings["http.extraHeader"] = f"Authorization: Basic {token}"
    env = {"GIT_TERMINAL_PROMPT": "0", "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(neutral),
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_COUNT": str(len(settings))}
    for index, (key, value) in enumerate(settings.items()):
        env[f"GIT_CONFIG_KEY_{index}"], env[f"GIT_CONFIG_VALUE_{index}"] = key, value
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        raise CheckoutError(f"git {args[0]} timed out after {timeout:.0f} s") from exc
    if done.returncode != 0:
        raise CheckoutError(redact(f"git {' '.join(args[:2])} failed: {done.stderr.strip()}"))
    return done.stdout


def is_local_path(source: str) -> bool:
    return "://" not in source and not re.match(r"^[\w.-]+@[\w.-]+:", source) and Path(source).exists()


def mirror_path(mirrors_dir: Path, source: str) -> Path:
    """Stable folder for a source: a readable stem plus a hash of the exact URL or path."""
    key = str(Path(source).resolve()) if is_local_path(source) else source
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", key.rstrip("/").rsplit("/", 1)[-1])[:40] or "repo"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return mirrors_dir / f"{stem}-{digest}.git"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_mirror(mirrors_dir: Path, source: str) -> Path:
    """Clone ``source`` as a bare mirror, or fetch what is new into the existing one.

    A mirror's refspec is ``+refs/*:refs/*`` with ``--prune``, so rewritten history
    (force pushes) replaces the old refs instead of failing the fetch.
    """
    path = mirror_path(mirrors_dir, source)
    local = is_local_path(source)
    url, credentials = (str(Path(source).resolve()), None) if local else split_credentials(source)
    if url.startswith("-"):
        raise RemoteUnreachable(f"not a repository URL or path: {redact(source)!r}")
    with _locked(path):
        try:
            if (path / "HEAD").exists():
                git("config", "remote.origin.url", url, cwd=path)
                git("fetch", "--prune", "--quiet", "origin", cwd=path, local_files=local, credentials=credentials)
            else:
                shutil.rmtree(path, ignore_errors=True)
                git("clone", "--mirror", "--quiet", "--", url, str(path), local_files=local,
                    credentials=credentials)
        except CheckoutError as exc:
            raise RemoteUnreachable(redact(f"cannot fetch {source}: {exc}")) from exc
    return path


def mirror_holding(mirrors_dir: Path, source: str, sha: str) -> Path:
    """The mirror of ``source`` with ``sha`` in it, fetched only when it lacks the commit.

    What a push or a run already fetched stays fetched: the analysis after a run and a
    bisection step between two measured commits read what is there (the commit and its
    ancestors) instead of asking the remote again.
    """
    path = mirror_path(mirrors_dir, source)
    if (path / "HEAD").exists() and has_commit(path, sha):
        return path
    return ensure_mirror(mirrors_dir, source)


def resolve(repo: Path, rev: str) -> str:
    """The full SHA of ``rev`` in ``repo`` (a mirror or a working repository)."""
    try:
        return git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", cwd=repo).strip()
    except CheckoutError as exc:
        raise UnknownRevision(f"unknown revision {rev!r} in {repo}") from exc


def rev_range(repo: Path, spec: str) -> list[str]:
    """SHAs of ``A..B`` oldest first, following first parents (the branch's own history)."""
    if ".." not in spec:
        raise UnknownRevision(f"a range looks like A..B, got {spec!r}")
    start, end = spec.split("..", 1)
    start_sha, end_sha = resolve(repo, start), resolve(repo, end or "HEAD")
    out = git("rev-list", "--reverse", "--first-parent", f"{start_sha}..{end_sha}", cwd=repo)
    return out.split()


def recent(repo: Path, rev: str, count: int) -> list[str]:
    """The last ``count`` first-parent commits up to ``rev``, oldest first."""
    out = git("rev-list", "--reverse", "--first-parent", f"--max-count={count}", resolve(repo, rev), cwd=repo)
    return out.split()


def commit_info(repo: Path, sha: str) -> CommitInfo:
    fields = git("show", "-s", "--format=%H%x00%P%x00%an <%ae>%x00%ct%x00%B", "--end-of-options", sha, cwd=repo)
    full, parents, author, stamp, message = fields.split("\x00", 4)
    return CommitInfo(
        sha=full,
        parents=parents.split(),
        author=author,
        message=message.strip(),
        committed_at=datetime.fromtimestamp(int(stamp), UTC),
        position=int(git("rev-list", "--first-parent", "--count", full, cwd=repo)),
    )


@dataclass(frozen=True)
class DefaultBranch:
    """The branch whose first-parent history is a repository's history, and the commits that hold it."""

    name: str
    # Full SHAs of the refs that hold it: the mirror's branch and, for a local checkout, its
    # remote-tracking copy (``origin/main`` may be ahead of a local ``main``, or behind it).
    tips: tuple[str, ...]


# Guessed, in this order, when nothing names the default branch.
USUAL_DEFAULT_BRANCHES = ("main", "master")


def _ref_commit(repo: Path, ref: str) -> str | None:
    try:
        return git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", cwd=repo).strip() or None
    except CheckoutError:
        return None


def _symbolic(repo: Path, ref: str) -> str:
    try:
        return git("symbolic-ref", "--quiet", "--", ref, cwd=repo).strip()
    except CheckoutError:
        return ""


def default_branch(mirror: Path, configured: str = "", source: Path | None = None) -> DefaultBranch | None:
    """The default branch of the repository ``mirror`` mirrors; None when nothing says which it is.

    ``configured`` (the registration's) wins when the mirror has such a branch; ``HEAD``, what a
    local path is registered with, names none. Then what the repository says itself: for a local
    checkout (``source``) its remote's default (``origin/HEAD``) — never its own ``HEAD``, which is
    whatever branch the user has checked out —; for a mirror of a remote, the remote's ``HEAD``.
    Then ``main`` or ``master``, then the only branch there is.
    """
    names = [configured] if configured and configured != "HEAD" else []
    if source is not None and source.resolve() != mirror.resolve():
        names.append(_symbolic(source, "refs/remotes/origin/HEAD").removeprefix("refs/remotes/origin/"))
    else:
        names.append(_symbolic(mirror, "HEAD").removeprefix("refs/heads/"))
    names += USUAL_DEFAULT_BRANCHES
    for name in dict.fromkeys(n for n in names if n):
        tips = [sha for ref in (f"refs/heads/{name}", f"refs/remotes/origin/{name}") if (sha := _ref_commit(mirror, ref))]
        if tips:
            return DefaultBranch(name, tuple(dict.fromkeys(tips)))
    heads = git("for-each-ref", "--format=%(refname)", "refs/heads", cwd=mirror).split()
    if len(heads) == 1 and (tip := _ref_commit(mirror, heads[0])):
        return DefaultBranch(heads[0].removeprefix("refs/heads/"), (tip,))
    return None


def first_parent_count(repo: Path, rev: str) -> int:
    """How many commits the first-parent chain of ``rev`` holds, itself included (``CommitInfo.position``)."""
    return int(git("rev-list", "--first-parent", "--count", "--end-of-options", rev, cwd=repo))


def on_first_parent_history(repo: Path, tips: Sequence[str], positions: Mapping[str, int]) -> set[str]:
    """Those SHAs of ``positions`` (SHA → first-parent position) on the first-parent history of a tip.

    A commit at position ``p`` is on that history exactly when it is ``tip~(n - p)``, ``n`` being the
    tip's own position: two git calls per tip, however long the history. Commits merged in from a
    branch (second parents) are not on it, as ``rev_range`` and the history's order never count them.
    """
    found: set[str] = set()
    for tip in tips:
        length = first_parent_count(repo, tip)
        wanted = {sha: length - at for sha, at in positions.items() if sha not in found and 0 < at <= length}
        if not wanted:
            continue
        there = git("rev-parse", *(f"{tip}~{back}" for back in wanted.values()), cwd=repo).split()
        found |= {sha for sha, at in zip(wanted, there, strict=True) if sha == at}
    return found


def branch_of(repo: Path, sha: str, asked: Sequence[str] = (), besides: Sequence[str] = ()) -> str:
    """A name for the branch a commit off the default branch is on, as the user knows it.

    A branch (or tag) among ``asked`` (the revisions the user typed: ``feature``, ``HEAD`` while on
    it) that holds the commit wins; else the local branches, tags and remote branches that hold it,
    at most three; ``""`` when no ref holds it. ``besides``: names never given (the default branch,
    which holds a commit it merged in, though not on its first-parent history).
    """
    holding = git("for-each-ref", "--contains", sha, "--format=%(refname)", "refs/heads", "refs/tags", "refs/remotes",
                  cwd=repo).split()
    holding = [ref for ref in holding if not ref.endswith("/HEAD") and _short(ref) not in besides]
    for rev in asked:
        try:
            # rev-parse echoes --end-of-options itself before the name (git 2.39); a SHA has no name.
            named = git("rev-parse", "--symbolic-full-name", "--end-of-options", rev, cwd=repo).split()
        except CheckoutError:
            continue
        full = next((line for line in named if line != "--end-of-options"), "")
        if full in holding:
            return _short(full)
    names = [_short(ref) for ref in holding]
    return ", ".join(names[:3]) + (f" (+{len(names) - 3} more)" if len(names) > 3 else "")


def _short(ref: str) -> str:
    for prefix in ("refs/heads/", "refs/tags/", "refs/remotes/"):
        if ref.startswith(prefix):
            return ref.removeprefix(prefix)
    return ref


def has_commit(repo: Path, sha: str) -> bool:
    try:
        resolve(repo, sha)
    except UnknownRevision:
        return False
    return True


def merge_base(repo: Path, base: str, head: str) -> str:
    """The best common ancestor of ``base`` and ``head``: what a pull request is measured against."""
    try:
        return git("merge-base", "--end-of-options", base, head, cwd=repo).strip()
    except CheckoutError as exc:
        raise UnknownRevision(f"{base[:12]} and {head[:12]} have no common ancestor in {repo}") from exc


CHANGED_PATHS_LIMIT = 5000  # paths of one diff kept; beyond, the diff counts as not known


def changed_paths(repo: Path, base: str, head: str) -> list[str] | None:
    """The paths that differ between two commits' trees (added, removed, modified, renamed: both names);
    None when there are more than ``CHANGED_PATHS_LIMIT`` or git cannot say."""
    try:
        out = git("diff", "--name-only", "--no-renames", "-z", "--end-of-options", base, head, cwd=repo)
    except CheckoutError:
        return None
    paths = [p for p in out.split("\0") if p]
    return sorted(paths) if len(paths) <= CHANGED_PATHS_LIMIT else None


def worktree_commit(tree: Path) -> str:
    """The SHA a worktree made by ``worktree`` was checked out at, from the folder name roofwatch gave it."""
    return tree.name.rsplit("-", 1)[0]


@contextmanager
def worktree(mirror: Path, sha: str, worktrees_dir: Path) -> Iterator[Path]:
    """A detached worktree of ``mirror`` at exactly ``sha``; removed afterwards."""
    if not has_commit(mirror, sha):
        raise UnknownRevision(f"commit {sha} is not in the repository (was it pushed?)")
    sha = resolve(mirror, sha)
    worktrees_dir.mkdir(parents=True, exist_ok=True)
    path = worktrees_dir / f"{sha}-{uuid.uuid4().hex[:8]}"
    with _locked(mirror):
        git("worktree", "add", "--detach", "--force", "--", str(path), sha, cwd=mirror)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        with _locked(mirror):
            git("worktree", "prune", cwd=mirror)
