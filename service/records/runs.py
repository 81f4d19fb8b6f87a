"""Commits and runs in the database: record a commit with its branch position, create a run once."""

from __future__ import annotations

from sqlmodel import Session, col, select

from roofwatch.service.core.models import Commit, Device, Repository, Run
from roofwatch.service.core.vocabulary import MEASURED_STATES
from roofwatch.workers.checkout import CommitInfo


def find_commit(session: Session, repository_id: int, sha: str) -> Commit | None:
    """The repository's recorded commit with this full SHA, if it was ever recorded."""
    return session.exec(select(Commit).where(Commit.repository_id == repository_id, Commit.sha == sha)).first()


def upsert_commit(session: Session, repository: Repository, info: CommitInfo) -> Commit:
    """The commit's row, created on first sight; its first-parent position filled in when missing."""
    assert repository.id is not None
    commit = find_commit(session, repository.id, info.sha)
    if commit is None:
        commit = Commit(repository_id=repository.id, sha=info.sha, parents=info.parents,  # type: ignore[arg-type]
                        author=info.author, message=info.message, committed_at=info.committed_at,
                        position=info.position)
        session.add(commit)
        session.flush()
    elif commit.position is None:
        commit.position = info.position
        session.add(commit)
    return commit


def measured_on(session: Session, commit: Commit, device_fingerprint: str) -> Run | None:
    """A finished run of ``commit`` on the device with this fingerprint, if any.

    A ``skipped`` run (no suites were found) measured nothing: it does not count, so suites
    given later (``--suites``, ``repo set-suites``) run on that commit without ``--force``.
    """
    return session.exec(
        select(Run).join(Device, col(Run.device_id) == col(Device.id))
        .where(Run.commit_id == commit.id, Device.fingerprint == device_fingerprint,
               col(Run.state).in_(MEASURED_STATES))
    ).first()


def earlier_runs(session: Session, commit: Commit, device_fingerprint: str) -> bool:
    """Whether ``commit`` has any finished run on the device (a skipped one included)."""
    return session.exec(
        select(Run.id).join(Device, col(Run.device_id) == col(Device.id))
        .where(Run.commit_id == commit.id, Device.fingerprint == device_fingerprint,
               col(Run.state).in_(("succeeded", "failed", "skipped", "errored", "cancelled")))
    ).first() is not None


def create_run(session: Session, repository: Repository, commit: Commit, key: str,
               trigger: str = "manual") -> Run:
    """The run for ``key``, created queued unless it already exists (idempotent)."""
    run = session.exec(select(Run).where(Run.idempotency_key == key)).first()
    if run is None:
        run = Run(repository_id=repository.id, commit_id=commit.id, trigger=trigger,  # type: ignore[arg-type]
                  idempotency_key=key)
        session.add(run)
        session.flush()
    return run
