"""``roofwatch run``'s commits: a manual run recorded per commit, and the job that measures it.

The CLI picks the commits and shows progress; what a manual run records — the commit's row, an
idempotency key that names the attempt, the queued run — and the job a worker gets for it are
decided here, as the push, nightly and bisection flows decide theirs.

A commit that is not on the default branch's first-parent history (``--rev feature``, ``--last 3``
while a feature branch is checked out) is recorded as a *branch run*: ``Run.branch`` names its
branch and ``Run.base_sha`` where it left the default branch. Its run is stored and shown, and is
never a point of the default branch's history (``roofwatch.service.records.runs.history_runs``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sqlmodel import select

from roofwatch.common.errors import UnknownRevision
from roofwatch.common.jobs import Job
from roofwatch.git import checkout
from roofwatch.git.checkout import CommitInfo, DefaultBranch
from roofwatch.service.core.config import Settings
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.keys import branch_run_key, manual_run_key, next_attempt, run_key_prefix
from roofwatch.service.core.models import Commit, Repository, Run
from roofwatch.service.flows.measure import job_for
from roofwatch.service.records import run_summaries
from roofwatch.service.records.runs import create_run, earlier_runs, measured_on, upsert_commit

NO_BRANCH = "(no branch)"  # a commit off the default branch that no branch or tag holds


@dataclass(frozen=True)
class OffBranch:
    """Where a commit off the default branch belongs: its branch, and where that left the default branch."""

    branch: str
    base_sha: str | None


def place(mirror: Path, source: Path, configured: str, infos: Sequence[CommitInfo],
          asked: Sequence[str] = ()) -> tuple[DefaultBranch | None, dict[str, OffBranch]]:
    """The default branch, and the commits of ``infos`` that are not on its first-parent history.

    ``source`` is where the user's revision names mean what they see (a local checkout, else the
    mirror); ``asked`` the revisions they typed, which name a commit's branch first. When no
    default branch can be told (``checkout.default_branch``), every commit counts as on it, as
    before branches were told apart.
    """
    default = checkout.default_branch(mirror, configured, source)
    if default is None or not infos:
        return default, {}
    on = checkout.on_first_parent_history(mirror, default.tips, {info.sha: info.position for info in infos})
    off: dict[str, OffBranch] = {}
    for info in infos:
        if info.sha in on:
            continue
        try:
            base: str | None = checkout.merge_base(mirror, default.tips[0], info.sha)
        except UnknownRevision:
            base = None
        name = checkout.branch_of(source, info.sha, asked, besides=(default.name, f"origin/{default.name}"))
        off[info.sha] = OffBranch(name or NO_BRANCH, base)
    return default, off


@dataclass(frozen=True)
class Plan:
    """Runs recorded, in branch order, as (run id, SHA); and the SHAs skipped as measured already."""

    queued: list[tuple[int, str]]
    skipped: list[str]


def plan(repository_id: int, infos: Sequence[CommitInfo], device_fingerprint: str, *, force: bool,
         skip_measured: bool, off_branch: Mapping[str, OffBranch] | None = None) -> Plan:
    """A queued manual run per commit of ``infos``.

    ``skip_measured``: leave out a commit this device has measured already (embedded mode, where
    this process is the device). A commit measured before gets a new attempt's key, so its
    earlier runs stay as they were; ``force`` asks for one even when it never finished.
    ``off_branch``: the commits not on the default branch (``place``), recorded as branch runs;
    a commit counts as measured only by runs of its own kind.
    """
    off_branch = off_branch or {}
    queued: list[tuple[int, str]] = []
    skipped: list[str] = []
    with session_scope() as session:
        repository = session.get(Repository, repository_id)
        assert repository is not None
        for info in infos:
            commit = upsert_commit(session, repository, info)
            off = off_branch.get(info.sha)
            branch = off.branch if off else ""
            if not force and skip_measured and measured_on(session, commit, device_fingerprint, branch):
                skipped.append(info.sha)
                continue
            again = force or earlier_runs(session, commit, device_fingerprint)
            purpose, keyed = ("branch", branch_run_key) if off else ("manual", manual_run_key)
            attempt = next_attempt(session, Run, run_key_prefix(
                repository.full_name, info.sha, device_fingerprint, purpose)) if again else 0
            key = keyed(repository.full_name, info.sha, device_fingerprint, attempt)
            run = create_run(session, repository, commit, key, branch=branch, base_sha=off.base_sha if off else None)
            queued.append((run.id, info.sha))  # type: ignore[arg-type]
    return Plan(queued, skipped)


def job(run_id: int, repository: Repository, settings: Settings, one_off: dict[str, Any]) -> tuple[Job, Commit]:
    """The worker's job for a queued manual run (``one_off``: suites given for this call only), and its commit."""
    with session_scope() as session:
        queued = session.get(Run, run_id)
        assert queued is not None
        commit = session.exec(select(Commit).where(Commit.id == queued.commit_id)).one()
        return replace(job_for(queued, repository, commit, settings), **one_off), commit


def newest_runs(repository_id: int, infos: Sequence[CommitInfo]) -> list[dict[str, object]]:
    """The newest run of each commit, with the counts ``roofwatch run``'s summary prints."""
    with session_scope() as session:
        return run_summaries.newest_runs(session, repository_id, [(info.sha, info.message) for info in infos])
