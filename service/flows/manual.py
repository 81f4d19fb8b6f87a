"""``roofwatch run``'s commits: a manual run recorded per commit, and the job that measures it.

The CLI picks the commits and shows progress; what a manual run records — the commit's row, an
idempotency key that names the attempt, the queued run — and the job a worker gets for it are
decided here, as the push, nightly and bisection flows decide theirs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlmodel import select

from roofwatch.common.jobs import Job
from roofwatch.service.core.config import Settings
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.keys import manual_run_key, next_attempt, run_key_prefix
from roofwatch.service.core.models import Commit, Repository, Run
from roofwatch.service.flows.measure import job_for
from roofwatch.service.records.runs import create_run, earlier_runs, measured_on, upsert_commit
from roofwatch.workers.checkout import CommitInfo


@dataclass(frozen=True)
class Plan:
    """Runs recorded, in branch order, as (run id, SHA); and the SHAs skipped as measured already."""

    queued: list[tuple[int, str]]
    skipped: list[str]


def plan(repository_id: int, infos: Sequence[CommitInfo], device_fingerprint: str, *, force: bool,
         skip_measured: bool) -> Plan:
    """A queued manual run per commit of ``infos``.

    ``skip_measured``: leave out a commit this device has measured already (embedded mode, where
    this process is the device). A commit measured before gets a new attempt's key, so its
    earlier runs stay as they were; ``force`` asks for one even when it never finished.
    """
    queued: list[tuple[int, str]] = []
    skipped: list[str] = []
    with session_scope() as session:
        repository = session.get(Repository, repository_id)
        assert repository is not None
        for info in infos:
            commit = upsert_commit(session, repository, info)
            if not force and skip_measured and measured_on(session, commit, device_fingerprint):
                skipped.append(info.sha)
                continue
            again = force or earlier_runs(session, commit, device_fingerprint)
            attempt = next_attempt(session, Run, run_key_prefix(
                repository.full_name, info.sha, device_fingerprint, "manual")) if again else 0
            key = manual_run_key(repository.full_name, info.sha, device_fingerprint, attempt)
            run = create_run(session, repository, commit, key)
            queued.append((run.id, info.sha))  # type: ignore[arg-type]
    return Plan(queued, skipped)


def job(run_id: int, repository: Repository, settings: Settings, one_off: dict[str, Any]) -> tuple[Job, Commit]:
    """The worker's job for a queued manual run (``one_off``: suites given for this call only), and its commit."""
    with session_scope() as session:
        queued = session.get(Run, run_id)
        assert queued is not None
        commit = session.exec(select(Commit).where(Commit.id == queued.commit_id)).one()
        return replace(job_for(queued, repository, commit, settings), **one_off), commit
