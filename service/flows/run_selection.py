"""What ``roofwatch run`` measures: the repository a name, path or URL means, the commits a
selection names (in branch order), where each commit lies, and the one-off suites it runs with.

Everything here is read before anything is measured, so a bad revision, an unreadable suites file
or an unknown repository is an error before the first checkout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofwatch.common.errors import CheckoutError, SuiteConfigError
from roofwatch.common.limits import PYPROJECT_LIMIT
from roofwatch.git import checkout
from roofwatch.git.checkout import CommitInfo, DefaultBranch
from roofwatch.service.core.config import Settings
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.models import Repository
from roofwatch.service.flows import manual
from roofwatch.service.flows.repositories import mirror_and_source, repository_for, resolve_repository
from roofwatch.service.records.suite_configs import current
from roofwatch.suite_config.declared import parse_toml, suites_in
from roofwatch.suite_config.external import choose, parse_suites_file

DEFAULT_LAST = 1


@dataclass(frozen=True)
class Selection:
    """The commits a user asks for: revisions, a range ``A..B``, the last N of each revision."""

    revs: tuple[str, ...] = ()
    range_spec: str | None = None
    last: int | None = None


@dataclass(frozen=True)
class Prepared:
    """A ``roofwatch run`` ready to plan: its repository (registered once it could be fetched), where
    the user's revision names mean what they see, the commits in branch order, which of them lie
    off the default branch, and the one-off suites' job fields."""

    repository: Repository
    source: Path
    infos: list[CommitInfo]
    default: DefaultBranch | None
    off_branch: dict[str, manual.OffBranch]
    one_off: dict[str, Any]


def prepare(repo: str, selection: Selection, settings: Settings, suites_file: Path | None = None,
            suites_from: str | None = None) -> Prepared:
    """Resolve, fetch and read what a run of ``selection`` in ``repo`` needs (``RoofwatchError`` or
    ``OSError`` on bad input, before anything is measured)."""
    with session_scope() as session:
        repository = repository_for(session, repo)
    mirror, source = mirror_and_source(repository, settings.mirrors_dir)
    if repository.id is None:  # a path or URL seen first: registered once it could be fetched
        with session_scope() as session:
            repository = resolve_repository(session, repo)
    shas = select_commits(source, selection.revs, selection.range_spec, selection.last)
    # In branch order (first-parent position, never dates): each commit is analysed after the ones before it.
    infos = sorted((checkout.commit_info(mirror, sha) for sha in shas), key=lambda i: i.position)
    # A commit off the default branch is measured and stored as a branch run, off its history.
    default, off_branch = manual.place(mirror, source, repository.default_branch, infos,
                                       asked_revisions(selection.revs, selection.range_spec))
    one_off = one_off_suites(suites_file, suites_from, source)
    return Prepared(repository, source, infos, default, dict(off_branch), one_off)


def suites_needing_a_gpu(prepared: Prepared) -> list[str]:
    """The suites of the newest commit to run that say they need a GPU (``gpu_suites``)."""
    if not prepared.infos:
        return []
    with session_scope() as session:
        stored = current(session, prepared.repository.id)  # type: ignore[arg-type]
        stored_toml = stored.content if stored else ""
    return gpu_suites(prepared.source, prepared.infos[-1].sha, prepared.one_off.get("suites_toml") or stored_toml)


def select_commits(source_repo: Path, revs: Sequence[str], range_spec: str | None, last: int | None) -> list[str]:
    """SHAs to measure, oldest first, without repeats."""
    shas: list[str] = []
    if range_spec:
        shas += checkout.rev_range(source_repo, range_spec)
    if last:
        for rev in revs or ["HEAD"]:
            shas += checkout.recent(source_repo, rev, last)
    else:
        shas += [checkout.resolve(source_repo, rev) for rev in revs]
    if not shas:
        shas = checkout.recent(source_repo, "HEAD", DEFAULT_LAST)
    return list(dict.fromkeys(shas))


def asked_revisions(revs: Sequence[str], range_spec: str | None) -> list[str]:
    """The revisions the user named (``HEAD`` when none): what names a branch run's branch first."""
    asked = list(revs)
    if range_spec and ".." in range_spec:
        asked.append(range_spec.split("..", 1)[1] or "HEAD")
    return asked or ["HEAD"]


def one_off_suites(suites_file: Path | None, suites_from: str | None, source_repo: Path) -> dict[str, Any]:
    """Job fields (a run's or an A/B's) for ``--suites FILE`` and ``--suites-from REF``, checked before anything runs."""
    fields: dict[str, Any] = {}
    if suites_file is not None:
        text = suites_file.read_text(encoding="utf-8")
        parse_suites_file(text)
        fields |= {"suites_toml": text, "suites_label": f"--suites {suites_file.name}"}
    if suites_from:
        fields["suites_from"] = checkout.resolve(source_repo, suites_from)
    return fields


def gpu_suites(source_repo: Path, sha: str, suites_toml: str) -> list[str]:
    """The suites that say they need a GPU (``gpu = true``), as the newest commit to run declares them.

    The commit's own ``pyproject.toml`` is read from git without checking anything out, and chosen
    between it and ``suites_toml`` (a suites file, stored or one-off) as the worker will choose. A
    file that cannot be read here names no suite: the run itself reports what is wrong with it. Its
    size is asked first: one over ``PYPROJECT_LIMIT`` is never read (parsing 10 MB of TOML took
    25 s and 715 MB), as the worker never reads it.
    """
    path = f"{sha}:pyproject.toml"
    try:
        try:
            size = int(checkout.git("cat-file", "-s", path, cwd=source_repo, local_files=True))
        except CheckoutError:  # no pyproject.toml in the commit
            own = None
        else:
            text = checkout.git("show", path, cwd=source_repo, local_files=True) if size <= PYPROJECT_LIMIT else ""
            own = suites_in(parse_toml(text, "pyproject.toml")) if text else None
        specs, _ = choose(own, suites_toml, "")
    except SuiteConfigError:
        return []
    return [spec.name for spec in specs or [] if spec.gpu]
