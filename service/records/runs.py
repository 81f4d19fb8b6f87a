"""Commits and runs in the database: record a commit with its branch position, create a run once."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from sqlalchemy import ColumnElement, and_
from sqlmodel import Session, col, select

from roofwatch.common.vocabulary import (
    BRANCH_HISTORY_TRIGGERS,
    LATEST_EXCLUDED_TRIGGERS,
    MEASURED_STATES,
    OFF_BRANCH_TRIGGERS,
    TERMINAL_STATES,
    Trigger,
)
from roofwatch.service.core.models import Commit, Device, Repository, Run

# Which runs make the default branch's history. A run of a commit off that branch (``Run.branch``
# set) is stored and shown on its own page, and never anything below: a point of the branch's
# series, its head on the overview, its newest measurement, or a baseline its changes are found by.


def on_default_branch() -> ColumnElement[bool]:
    """Runs of a commit of the default branch's first-parent history (every run but a branch run)."""
    return col(Run.branch) == ""


def history_runs() -> ColumnElement[bool]:
    """Runs that are points of the default branch's history, analysed in branch order."""
    return and_(col(Run.trigger).in_(BRANCH_HISTORY_TRIGGERS), on_default_branch())


def drawn_runs() -> ColumnElement[bool]:
    """Runs drawn on the branch's charts and returned by the series API: a pull request's head is not."""
    return and_(col(Run.trigger).not_in(OFF_BRANCH_TRIGGERS), on_default_branch())


def latest_runs() -> ColumnElement[bool]:
    """Runs that may speak for the branch's newest state: not a pull request's, a bisection's or a branch's."""
    return and_(col(Run.trigger).not_in(LATEST_EXCLUDED_TRIGGERS), on_default_branch())


def is_history_run(run: Run) -> bool:
    return run.trigger in BRANCH_HISTORY_TRIGGERS and not run.branch


def find_commit(session: Session, repository_id: int, sha: str) -> Commit | None:
    """The repository's recorded commit with this full SHA, if it was ever recorded."""
    return session.exec(select(Commit).where(Commit.repository_id == repository_id, Commit.sha == sha)).first()


class CommitFacts(Protocol):
    """What git says of a commit (``roofwatch.git.checkout.CommitInfo``), as a commit's row stores it."""

    @property
    def sha(self) -> str: ...
    @property
    def parents(self) -> list[str]: ...
    @property
    def author(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def committed_at(self) -> datetime: ...
    @property
    def position(self) -> int: ...


def upsert_commit(session: Session, repository: Repository, info: CommitFacts) -> Commit:
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


def measured_on(session: Session, commit: Commit, device_fingerprint: str, branch: str = "") -> Run | None:
    """A finished run of ``commit`` on the device with this fingerprint, if any.

    A ``skipped`` run (no suites were found) measured nothing: it does not count, so suites
    given later (``--suites``, ``repo set-suites``) run on that commit without ``--force``. Only
    runs of the same kind count: a commit measured on a branch (``branch`` set) and later merged
    into the default branch (fast-forward) is measured again as a point of its history.
    """
    same_kind = on_default_branch() if not branch else col(Run.branch) != ""
    return session.exec(
        select(Run).join(Device, col(Run.device_id) == col(Device.id))
        .where(Run.commit_id == commit.id, Device.fingerprint == device_fingerprint,
               col(Run.state).in_(MEASURED_STATES), same_kind)
    ).first()


def earlier_runs(session: Session, commit: Commit, device_fingerprint: str) -> bool:
    """Whether ``commit`` has any finished run on the device (a skipped one included)."""
    return session.exec(
        select(Run.id).join(Device, col(Run.device_id) == col(Device.id))
        .where(Run.commit_id == commit.id, Device.fingerprint == device_fingerprint,
               col(Run.state).in_(sorted(TERMINAL_STATES)))
    ).first() is not None


def create_run(session: Session, repository: Repository, commit: Commit, key: str,
               trigger: Trigger = Trigger.MANUAL, branch: str = "", base_sha: str | None = None) -> Run:
    """The run for ``key``, created queued unless it already exists (idempotent).

    ``branch``: the branch of a commit off the default branch (its run is kept off the branch's
    history), with ``base_sha`` where that branch left the default branch.
    """
    run = session.exec(select(Run).where(Run.idempotency_key == key)).first()
    if run is None:
        run = Run(repository_id=repository.id, commit_id=commit.id, trigger=trigger,  # type: ignore[arg-type]
                  idempotency_key=key, branch=branch, base_sha=base_sha)
        session.add(run)
        session.flush()
    return run
