"""One series read in branch order: a benchmark's medians, a test's outcomes, the previous run.

Order is the first-parent position (``Commit.position``), never the committer date: "Rebase
and merge" gives a pull request's commits one date, and rebases and cherry-picks send dates
backwards. Only main-branch runs make a history; a pull request's head is not on the branch.
Where a commit was measured more than once, its latest run speaks for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from roofwatch.service.analysis.correctness import FAILING
from roofwatch.service.analysis.history import Point
from roofwatch.service.core.models import Commit, Measurement, Run, TestOutcome
from roofwatch.service.core.vocabulary import BRANCH_HISTORY_TRIGGERS, MEASURED_STATES

SERIES_LIMIT = 500  # latest commits per series searched for change points


def previous_run(session: Session, run: Run) -> Run | None:
    """The latest run of the nearest earlier measured commit on the branch, on the same device."""
    commit = session.get(Commit, run.commit_id)
    if commit is None or commit.position is None or run.device_id is None:
        return None
    return session.exec(
        select(Run).join(Commit, col(Run.commit_id) == col(Commit.id))
        .where(Run.repository_id == run.repository_id, Run.device_id == run.device_id, Run.id != run.id,
               col(Run.state).in_(MEASURED_STATES), col(Run.trigger).in_(BRANCH_HISTORY_TRIGGERS),
               col(Commit.position) < commit.position)
        .order_by(col(Commit.position).desc(), col(Run.id).desc())
    ).first()


def benchmark_points(session: Session, benchmark_id: int, device_id: int, limit: int = SERIES_LIMIT,
                     samples_near: int | None = None) -> list[Point]:
    """One point per commit (its latest run's median), oldest position first.

    Raw samples are read only for the point at position ``samples_near`` and its two
    neighbours (the only ones a newly measured commit is compared with): a long history costs
    its medians, never hundreds of sample lists.
    """
    rows = session.exec(
        select(Commit.position, Commit.sha, Measurement.median, Measurement.id)
        .join(Run, col(Measurement.run_id) == col(Run.id))
        .join(Commit, col(Run.commit_id) == col(Commit.id))
        .where(Measurement.benchmark_id == benchmark_id, Run.device_id == device_id,
               col(Run.trigger).in_(BRANCH_HISTORY_TRIGGERS), col(Commit.position).is_not(None))
        .order_by(col(Commit.position).desc(), col(Run.id).desc()).limit(limit * 3)
    ).all()
    latest: dict[int, tuple[str, float, int]] = {}
    for position, sha, median, measurement_id in rows:
        if len(latest) >= limit and position not in latest:
            break
        latest.setdefault(position, (sha, median, measurement_id))  # type: ignore[arg-type]
    positions = sorted(latest)
    wanted: set[int] = set()
    if samples_near is not None and samples_near in latest:
        i = positions.index(samples_near)
        wanted = {latest[p][2] for p in positions[max(0, i - 1):i + 2]}
    samples = dict(session.exec(select(Measurement.id, Measurement.samples)
                                .where(col(Measurement.id).in_(wanted))).all()) if wanted else {}
    return [Point(p, latest[p][0], latest[p][1], tuple(samples.get(latest[p][2]) or ()))  # type: ignore[arg-type]
            for p in positions]


@dataclass(frozen=True)
class TestPoint:
    """A test's outcome at one commit: its latest run's, and whether runs there disagreed."""

    position: int
    sha: str
    commit_id: int
    run_id: int
    suite: str
    failing: bool
    flaky: bool
    message: str


def test_outcomes(session: Session, repository_id: int, device_id: int, test_id: str) -> list[TestPoint]:
    """The test's outcome at every measured commit of the branch on the device, oldest first."""
    rows = session.execute(
        sa_select(col(Commit.position), col(Commit.sha), col(Commit.id), col(Run.id), col(TestOutcome.suite),
               col(TestOutcome.outcome), col(TestOutcome.message))
        .join(Run, col(TestOutcome.run_id) == col(Run.id))
        .join(Commit, col(Run.commit_id) == col(Commit.id))
        .where(col(Run.repository_id) == repository_id, col(Run.device_id) == device_id, col(TestOutcome.test_id) == test_id,
               col(Run.trigger).in_(BRANCH_HISTORY_TRIGGERS), col(Run.state).in_(MEASURED_STATES),
               col(TestOutcome.outcome).in_(("passed", *FAILING)), col(Commit.position).is_not(None))
        .order_by(col(Commit.position), col(Run.id).desc())
    ).all()
    points: dict[int, TestPoint] = {}
    seen: dict[int, set[bool]] = {}
    for position, sha, commit_id, run_id, suite, outcome, message in rows:
        failing = outcome in FAILING
        seen.setdefault(position, set()).add(failing)  # type: ignore[arg-type]
        points.setdefault(position, TestPoint(position, sha, commit_id, run_id, suite, failing, False,  # type: ignore[arg-type]
                                              message or ""))
    return [TestPoint(**{**vars(p), "flaky": len(seen[p.position]) > 1}) for p in points.values()]
