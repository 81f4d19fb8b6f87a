"""Read a finished run into its series' history: candidates, correctness episodes, narrowing.

Every series is read in branch order (first-parent position), and each call looks at the
whole stretch a run adds to, so measuring commits in order, out of order, twice or in halves
gives one change per real step. What a run finds:

- **correctness**: each failing stretch of a test (``history.failure_episodes``) is grouped with
  the other parametrizations of its test function that one commit broke (``failure_groups``):
  one change per group, listing its parametrizations, shown at once (a test outcome needs no A/B)
  and bisected once; ``fixed`` when all of them pass again later.
- **performance**: each step of a benchmark's series (``history.steps``) is a *candidate*. A
  candidate with unmeasured commits in its range is *narrowed* first (``narrowing``); a
  narrowed one is *confirmed* by an A/B of exactly its two adjacent commits
  (``confirmation``). A sighting that overlaps a known change is that change. A suite that runs
  files from outside the commit is read one stretch of the same files at a time: a step where
  those files changed is the benchmark's, not the kernel's (``analysis.suite_files``).
- **numerics drift**: a case whose error (``max_abs_err``, ``max_rel_err``, or the share of
  elements beyond half an ulp, ``beyond_half_ulp``) grew ``NUMERICS_DRIFT_FACTOR``-fold since
  the previous measured commit, even while it passes.

Reads the repository's local mirror (``git rev-list``), never the network: the flow fetches
before it opens the transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

from sqlmodel import Session, col, select

from roofwatch.common.vocabulary import MEASURED_STATES, OPEN_STATES, PERFORMANCE_KINDS, ChangeKind, TriageState
from roofwatch.service.analysis import failure_groups, history, lifecycle, suite_files
from roofwatch.service.analysis.correctness import FAILING
from roofwatch.service.core.models import Benchmark, Change, Commit, Measurement, Run, TestOutcome
from roofwatch.service.flows import compiled_changes, narrowing
from roofwatch.service.records import changes
from roofwatch.service.records.runs import find_commit, is_history_run
from roofwatch.service.records.series import TestPoint, benchmark_points, previous_run, test_outcomes

NUMERICS_DRIFT_FACTOR = 4.0  # error growth (two bits) that makes a numerics-drift change
NUMERICS_ERROR_FLOOR = 1e-6  # errors below this are rounding noise, whatever the ratio
NUMERICS_METRICS = ("max_abs_err", "max_rel_err", "beyond_half_ulp")  # TestOutcome columns tracked

# (good sha, bad sha) -> the first-parent SHAs after good up to and including bad, oldest first.
CommitsBetween = Callable[[str, str], list[str]]

# (run id, benchmarks read, benchmarks in the run): set by an in-process caller (the CLI) so
# a long analysis shows progress as measuring does. Called at most every PROGRESS_EVERY_S.
AnalysisListener = Callable[[int, int, int], None]
analysis_progress: ContextVar[AnalysisListener | None] = ContextVar("analysis_progress", default=None)
PROGRESS_EVERY_S = 0.5


@dataclass
class AnalysisSummary:
    run_id: int
    baseline_run_id: int | None
    changes: list[int] = field(default_factory=list)
    fixed: list[int] = field(default_factory=list)


def analyze_run(session: Session, run_id: int, commits_between: CommitsBetween) -> AnalysisSummary:
    run = session.get(Run, run_id)
    if run is None:
        raise LookupError(f"no run {run_id}")
    base = previous_run(session, run)
    summary = AnalysisSummary(run_id=run_id, baseline_run_id=base.id if base else None)
    if run.state not in MEASURED_STATES or run.device_id is None or not is_history_run(run):
        return summary  # a pull request's head, or a commit off the default branch, is no point of its history
    commit = session.get(Commit, run.commit_id)
    assert commit is not None
    if commit.position is None:
        return summary  # recorded before positions were: not placed on the branch
    narrowing.narrow(session, run, commit)
    _correctness(session, run, summary, commits_between)
    if base is not None:
        _numerics(session, run, commit, base, summary)
    _performance(session, run, commit, summary, commits_between)
    summary.changes += compiled_changes.flag(session, run, commit)
    return summary


def _start(session: Session, change: Change, good: Commit | None, bad: Commit, commits_between: CommitsBetween,
           narrowed_phase: str) -> None:
    """Give a new change its phase: narrowed already, or a range of unmeasured commits to bisect."""
    if lifecycle.narrowed(good.position if good else None, bad.position):  # type: ignore[arg-type]
        change.first_bad_commit_id, change.phase = bad.id, narrowed_phase
        return
    assert good is not None
    between = commits_between(good.sha, bad.sha)[:-1]
    if not between:
        change.first_bad_commit_id, change.phase = bad.id, narrowed_phase
        return
    change.details = {**change.details, "bisect_range": between, "device_id": change.device_id}
    if change.phase != lifecycle.CONFIRMED:
        change.phase = lifecycle.NARROWING
    session.add(change)


# -- correctness ---------------------------------------------------------------------------


def _correctness(session: Session, run: Run, summary: AnalysisSummary, commits_between: CommitsBetween) -> None:
    """One change per test function and commit that broke it (``failure_groups``), not per parametrization."""
    failing_here = session.exec(select(TestOutcome.test_id).where(
        TestOutcome.run_id == run.id, col(TestOutcome.outcome).in_(FAILING)).order_by(col(TestOutcome.id))).all()
    known = session.exec(select(Change).where(
        Change.repository_id == run.repository_id, Change.kind == ChangeKind.CORRECTNESS_FAILURE,
        Change.device_id == run.device_id).order_by(col(Change.id))).all()
    # The earlier changes' tests in the order they list them (a test passing here may be what fixes one),
    # then the run's other failures in the order it reported them: the first one's text speaks for its group.
    tests = list(dict.fromkeys([*(t for change in known for t in changes.members(change)), *failing_here]))
    points: dict[str, dict[str, TestPoint]] = {}
    episodes: dict[str, list[history.Episode]] = {}
    flaky: set[tuple[str, str]] = set()
    for test_id in tests:
        outcomes = test_outcomes(session, run.repository_id, run.device_id, test_id)  # type: ignore[arg-type]
        if not outcomes:
            continue
        points[test_id] = {o.sha: o for o in outcomes}
        flaky |= {(test_id, o.sha) for o in outcomes if o.flaky}
        episodes[test_id] = history.failure_episodes([history.Outcome(o.position, o.sha, o.failing) for o in outcomes])
    grouped: dict[int, tuple[Change, list[str]]] = {}  # change id -> the change, the tests this pass found in it
    for group in failure_groups.group_episodes(episodes):
        first_bad = points[group.tests[0]][group.first_bad.sha]
        start = group.last_good.position if group.last_good else None
        change = changes.find_same(session, repository_id=run.repository_id, kind=ChangeKind.CORRECTNESS_FAILURE,
                                   device_id=run.device_id, test_id=group.function, also_test_ids=group.tests,
                                   start=start, end=group.first_bad.position)
        if change is None:
            good = session.get(Commit, points[_passing_at(group, points)][group.last_good.sha].commit_id) \
                if group.last_good else None
            bad = session.get(Commit, first_bad.commit_id)
            assert bad is not None
            change = changes.record(
                session, repository_id=run.repository_id, device_id=run.device_id, kind=ChangeKind.CORRECTNESS_FAILURE,
                phase=lifecycle.CONFIRMED, good=good, bad=bad, run_id=run.id, suite=first_bad.suite,
                test_id=group.function, details={"message": first_bad.message[:2000], "tests": list(group.tests)})
            _start(session, change, good, bad, commits_between, lifecycle.CONFIRMED)
            summary.changes.append(change.id)  # type: ignore[arg-type]
        elif change.test_id != group.function:
            # Recorded per parametrization before failures were grouped: it becomes its function's change,
            # and the other parametrizations' changes of the same stretch are folded into it.
            change.test_id = group.function
            _fold_into(session, change, group.tests, start, group.first_bad.position)
        found = grouped.setdefault(change.id, (change, []))[1]  # type: ignore[arg-type]
        found.extend(t for t in group.tests if t not in found)
        if any((t, group.first_bad.sha) in flaky for t in group.tests) and not change.details.get("flaky"):
            change.details = {**change.details, "flaky": True}
        if group.fixed_at is not None and change.state in OPEN_STATES:
            change.state = TriageState.FIXED
            fixed_in = next(points[t][group.fixed_at.sha] for t in group.tests if group.fixed_at.sha in points[t])
            change.details = {**change.details, "fixed_at": group.fixed_at.sha, "fixed_in_run": fixed_in.run_id}
            summary.fixed.append(change.id)  # type: ignore[arg-type]
        session.add(change)
    for change, found in grouped.values():
        if changes.members(change) != found:
            change.details = {**change.details, "tests": found}
            session.add(change)


def _passing_at(group: failure_groups.EpisodeGroup, points: dict[str, dict[str, TestPoint]]) -> str:
    """A test of ``group`` measured at its last good commit (a parametrization added later was not)."""
    assert group.last_good is not None
    return next(t for t in group.tests if group.last_good.sha in points[t])


def _fold_into(session: Session, change: Change, tests: tuple[str, ...], start: int | None, end: int) -> None:
    """Hide the per-parametrization changes of ``tests`` that are this stretch, keeping ``change`` for all."""
    for other in session.exec(select(Change).where(
            Change.repository_id == change.repository_id, Change.kind == change.kind,
            Change.device_id == change.device_id, col(Change.test_id).in_(tests), Change.id != change.id,
            changes.shown())).all():
        if other.range_end_position is not None and lifecycle.overlaps(
                start, end, other.range_start_position, other.range_end_position):
            other.phase = lifecycle.REJECTED
            other.details = {**other.details, "folded_into": change.id,
                             "rejected": f"one of {change.test_id}'s parametrizations: change {change.id}"}
            session.add(other)


# -- numerics drift ------------------------------------------------------------------------


def _numerics(session: Session, run: Run, commit: Commit, base: Run, summary: AnalysisSummary) -> None:
    """A case whose measured error grew ``NUMERICS_DRIFT_FACTOR``-fold is drifting, even while it passes."""
    base_commit = session.get(Commit, base.commit_id)
    assert base_commit is not None
    base_rows = {(r.suite, r.test_id): r for r in session.exec(select(TestOutcome).where(TestOutcome.run_id == base.id))}
    for row in session.exec(select(TestOutcome).where(TestOutcome.run_id == run.id)).all():
        known = session.exec(select(Change).where(
            Change.repository_id == run.repository_id, Change.kind == ChangeKind.NUMERICS_DRIFT, Change.test_id == row.test_id,
            col(Change.state).in_(OPEN_STATES))).first()
        if known is not None and (known.range_end_position or 0) < commit.position:  # type: ignore[operator]
            value = getattr(row, known.details.get("metric", "max_abs_err"))
            if value is not None and value <= NUMERICS_DRIFT_FACTOR * max(known.details.get("before") or 0.0,
                                                                          NUMERICS_ERROR_FLOOR):
                known.state = TriageState.FIXED
                known.details = {**known.details, "fixed_in_run": run.id, "fixed_at": commit.sha}
                session.add(known)
                summary.fixed.append(known.id)  # type: ignore[arg-type]
        if row.outcome in FAILING:
            continue  # a failing case is a correctness failure, not a drift
        old = base_rows.get((row.suite, row.test_id))
        for metric in NUMERICS_METRICS:
            before = getattr(old, metric) if old else None
            after = getattr(row, metric)
            if before is None or after is None or after < NUMERICS_ERROR_FLOOR:
                continue
            if after <= NUMERICS_DRIFT_FACTOR * max(before, NUMERICS_ERROR_FLOOR):
                continue
            if changes.find_same(session, repository_id=run.repository_id, kind=ChangeKind.NUMERICS_DRIFT,
                                 device_id=run.device_id, test_id=row.test_id, start=base_commit.position,
                                 end=commit.position) is not None:  # type: ignore[arg-type]
                break
            change = changes.record(
                session, repository_id=run.repository_id, device_id=run.device_id, kind=ChangeKind.NUMERICS_DRIFT,
                phase=lifecycle.CONFIRMED, good=base_commit, bad=commit, run_id=run.id, suite=row.suite,
                test_id=row.test_id, change_pct=(after / max(before, NUMERICS_ERROR_FLOOR) - 1) * 100,
                details={"metric": metric, "before": before, "after": after})
            if lifecycle.narrowed(base_commit.position, commit.position):  # type: ignore[arg-type]
                change.first_bad_commit_id = commit.id
            summary.changes.append(change.id)  # type: ignore[arg-type]
            break


# -- performance candidates ---------------------------------------------------------------


def _performance(session: Session, run: Run, commit: Commit, summary: AnalysisSummary,
                 commits_between: CommitsBetween) -> None:
    measured = session.exec(select(Measurement.benchmark_id).where(Measurement.run_id == run.id)).all()
    listener, shown_at = analysis_progress.get(), time.monotonic()
    for done, benchmark_id in enumerate(measured):
        if listener is not None and time.monotonic() - shown_at >= PROGRESS_EVERY_S:
            listener(run.id, done, len(measured))  # type: ignore[arg-type]
            shown_at = time.monotonic()
        benchmark = session.get(Benchmark, benchmark_id)
        assert benchmark is not None
        points = benchmark_points(session, benchmark_id, run.device_id,  # type: ignore[arg-type]
                                  samples_near=commit.position, suite=benchmark.suite)
        here = [i for i, p in enumerate(points) if p.position == commit.position]
        if here:  # only the points whose suite ran the same files as this commit's
            points = suite_files.stretch_around(points, [p.files for p in points], here[0])
        confirmed_at = session.exec(select(Change.range_end_position).where(
            Change.repository_id == run.repository_id, Change.benchmark_id == benchmark_id,
            Change.device_id == run.device_id, Change.phase == lifecycle.CONFIRMED,
            col(Change.kind).in_(PERFORMANCE_KINDS))).all()
        for step in history.steps(points, newly_measured={commit.position},  # type: ignore[arg-type]
                                  higher_is_better=benchmark.higher_is_better,
                                  confirmed_at={p for p in confirmed_at if p is not None}):
            _candidate(session, run, benchmark, step, summary, commits_between)


def _candidate(session: Session, run: Run, benchmark: Benchmark, step: history.Step, summary: AnalysisSummary,
               commits_between: CommitsBetween) -> None:
    kind = (ChangeKind.PERF_REGRESSION if step.direction(benchmark.higher_is_better) == "regression"
            else ChangeKind.PERF_IMPROVEMENT)
    if changes.find_same(session, repository_id=run.repository_id, kind=kind, device_id=run.device_id,
                         benchmark_id=benchmark.id, start=step.good.position, end=step.bad.position):
        return  # a sighting of a known change: it is narrowed by runs, not by sightings
    good = find_commit(session, run.repository_id, step.good.sha)
    bad = find_commit(session, run.repository_id, step.bad.sha)
    assert good is not None and bad is not None  # both ends of a step are measured, so recorded
    change = changes.record(
        session, repository_id=run.repository_id, device_id=run.device_id, kind=kind, phase=lifecycle.CANDIDATE,
        good=good, bad=bad, run_id=run.id, benchmark_id=benchmark.id, suite=benchmark.suite,
        details=step.details())
    _start(session, change, good, bad, commits_between, lifecycle.CONFIRMING)
    summary.changes.append(change.id)  # type: ignore[arg-type]

