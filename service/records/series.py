"""One series read in branch order: a benchmark's medians, a test's outcomes, the previous run.

Order is the first-parent position (``Commit.position``), never the committer date: "Rebase
and merge" gives a pull request's commits one date, and rebases and cherry-picks send dates
backwards. Only main-branch runs make a history; a pull request's head is not on the branch,
nor is a commit measured off it (``Run.branch``). Where a commit was measured more than once,
its latest run speaks for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from roofwatch.common.metrics import measuring_suite
from roofwatch.common.vocabulary import MEASURED_STATES
from roofwatch.service.analysis.correctness import FAILING
from roofwatch.service.analysis.history import Point
from roofwatch.service.analysis.suite_files import digest
from roofwatch.service.core.models import Commit, Measurement, Run, SuiteExecution, TestOutcome
from roofwatch.service.records.runs import history_runs

SERIES_LIMIT = 500  # latest commits per series searched for change points


def previous_run(session: Session, run: Run) -> Run | None:
    """The latest run of the nearest earlier measured commit on the branch, on the same device."""
    commit = session.get(Commit, run.commit_id)
    if commit is None or commit.position is None or run.device_id is None:
        return None
    return session.exec(
        select(Run).join(Commit, col(Run.commit_id) == col(Commit.id))
        .where(Run.repository_id == run.repository_id, Run.device_id == run.device_id, Run.id != run.id,
               col(Run.state).in_(MEASURED_STATES), history_runs(), col(Commit.position) < commit.position)
        .order_by(col(Commit.position).desc(), col(Run.id).desc())
    ).first()


def benchmark_points(session: Session, benchmark_id: int, device_id: int, limit: int = SERIES_LIMIT,
                     samples_near: int | None = None, suite: str | None = None) -> list[Point]:
    """One point per commit (its latest run's median), oldest position first.

    Raw samples are read only for the point at position ``samples_near`` and its two
    neighbours (the only ones a newly measured commit is compared with): a long history costs
    its medians, never hundreds of sample lists. With ``suite`` (the benchmark's), each point
    carries the digest of the files its suite ran where they came from outside the commit.
    """
    files = col(SuiteExecution.suite_files) if suite is not None else None
    query = (sa_select(col(Commit.position), col(Commit.sha), col(Measurement.median), col(Measurement.id),
                       *([files] if files is not None else []))
             .select_from(Measurement)
             .join(Run, col(Measurement.run_id) == col(Run.id))
             .join(Commit, col(Run.commit_id) == col(Commit.id)))
    if suite is not None:
        query = query.outerjoin(SuiteExecution, and_(col(SuiteExecution.run_id) == col(Run.id),
                                                     col(SuiteExecution.name) == measuring_suite(suite)))
    rows = session.execute(
        query.where(col(Measurement.benchmark_id) == benchmark_id, col(Run.device_id) == device_id,
                    history_runs(), col(Commit.position).is_not(None))
        .order_by(col(Commit.position).desc(), col(Run.id).desc()).limit(limit * 3)
    ).all()
    latest: dict[int, tuple[str, float, int]] = {}
    digests: dict[int, str] = {}
    for position, sha, median, measurement_id, *record in rows:
        if len(latest) >= limit and position not in latest:
            break
        if position not in latest:
            digests[position] = digest(record[0] if record else None)
        latest.setdefault(position, (sha, median, measurement_id))
    positions = sorted(latest)
    wanted: set[int] = set()
    if samples_near is not None and samples_near in latest:
        i = positions.index(samples_near)
        wanted = {latest[p][2] for p in positions[max(0, i - 1):i + 2]}
    samples = dict(session.exec(select(Measurement.id, Measurement.samples)
                                .where(col(Measurement.id).in_(wanted))).all()) if wanted else {}
    return [Point(p, latest[p][0], latest[p][1], tuple(samples.get(latest[p][2]) or ()), digests.get(p, ""))  # type: ignore[arg-type]
            for p in positions]


FILES_BATCH = 500  # run ids per look-up of their suites' files


def suite_files_by_run(session: Session, run_ids: Iterable[int], suite: str) -> dict[int, Mapping[str, Any]]:
    """What ``suite`` (a benchmark's suite; a peak-memory suite reads its parent's) ran of outside files in
    each of these runs: run id → its ``suite_files`` record, {} where it ran the commit's own files."""
    ids = list(dict.fromkeys(run_ids))
    found: dict[int, Mapping[str, Any]] = {}
    for start in range(0, len(ids), FILES_BATCH):
        chunk = ids[start:start + FILES_BATCH]
        found |= {run_id: record or {} for run_id, record in session.execute(
            sa_select(col(SuiteExecution.run_id), col(SuiteExecution.suite_files))
            .where(col(SuiteExecution.run_id).in_(chunk), col(SuiteExecution.name) == measuring_suite(suite)))}
    return found


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
               history_runs(), col(Run.state).in_(MEASURED_STATES),
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
