"""Feed a finished run and its history to ``service.analysis``; store and follow up what it finds.

Performance changes are never stored on the evidence of separate runs alone: timings of one
commit vary between processes by more than many real regressions. A run produces
*candidates* — its difference from the previous measured commit, and the change points of
each series it extends — and every candidate is confirmed by an interleaved A/B of the two
commits either side of it (``followups.Confirm``, decided in ``confirm.apply``). Candidates
already decided, or inside a change that is being narrowed down, are not asked again.

Correctness needs no confirmation: a test that fails on the head and not on its baseline is a
change at once. A run whose commit lies inside an open change's range narrows that range
(``bisect.narrow``); a range wider than one commit asks for its midpoint to be measured.

Series are per device fingerprint, so a new driver, CUDA, torch or Triton, other clocks or
another GPU model start a new epoch instead of looking like a regression.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from sqlmodel import Session, col, select

from service.analysis import changepoints, compare, correctness
from service.core.models import Benchmark, Change, Commit, Device, Measurement, Repository, Run, TestOutcome
from service.flows import narrowing as bisect
from service.flows.main_branch import Confirm, FollowUp, commits_between, confirmation_for

ADJACENT_ALPHA = 0.01  # candidates only: every one is confirmed by A/B before it is a change
NUMERICS_DRIFT_FACTOR = 4.0  # error growth (two bits) that makes a numerics-drift change
NUMERICS_ERROR_FLOOR = 1e-6  # errors below this are rounding noise, whatever the ratio
SERIES_LIMIT = 500  # latest points per series searched for change points
RUN_NOISE_HISTORY = 30  # latest points whose run-to-run spread sizes the adjacent comparison
LEVEL_POINTS = 5  # earlier commits whose median is the level a new run is held against
OPEN_STATES = ("new", "acknowledged")


@dataclass
class AnalysisSummary:
    run_id: int
    baseline_run_id: int | None
    changes: list[int] = field(default_factory=list)
    fixed: list[int] = field(default_factory=list)
    followups: list[FollowUp] = field(default_factory=list)


@dataclass(frozen=True)
class SeriesPoint:
    commit_id: int
    sha: str
    median: float


def baseline_run(session: Session, run: Run) -> Run | None:
    """The latest run of an earlier commit of this repository on the same device."""
    commit = session.get(Commit, run.commit_id)
    if commit is None or commit.committed_at is None or run.device_id is None:
        return None
    return session.exec(
        select(Run).join(Commit, col(Run.commit_id) == col(Commit.id))
        .where(Run.repository_id == run.repository_id, Run.device_id == run.device_id,
               Run.id != run.id, col(Run.state).in_(("succeeded", "failed")),
               col(Commit.committed_at) < commit.committed_at)
        .order_by(col(Commit.committed_at).desc(), col(Run.id).desc())
    ).first()


def analyze_run(session: Session, run_id: int) -> AnalysisSummary:
    run = session.get(Run, run_id)
    if run is None:
        raise LookupError(f"no run {run_id}")
    base = baseline_run(session, run)
    summary = AnalysisSummary(run_id=run_id, baseline_run_id=base.id if base else None)
    if run.state not in ("succeeded", "failed") or run.device_id is None:
        if run.trigger == "bisect":
            summary.followups += bisect.next_steps(session, run.repository_id)  # skip it or measure it again
        return summary
    head_commit = session.get(Commit, run.commit_id)
    assert head_commit is not None
    base_commit = session.get(Commit, base.commit_id) if base else None
    bisect.narrow(session, run, head_commit)
    head_rows = _outcomes(session, run_id)
    base_rows = _outcomes(session, base.id) if base else None  # type: ignore[arg-type]
    _correctness(session, run, head_commit, head_rows, base_rows, base_commit, summary)
    if base_rows is not None and base_commit is not None:
        _numerics(session, run, head_commit, head_rows, base_rows, base_commit, summary)
    _performance(session, run, head_commit, base, base_commit, summary)
    summary.followups += bisect.next_steps(session, run.repository_id)
    return summary


# -- correctness ---------------------------------------------------------------------------


def _outcomes(session: Session, run_id: int) -> dict[str, TestOutcome]:
    rows = session.exec(select(TestOutcome).where(TestOutcome.run_id == run_id)).all()
    return {f"{row.suite}::{row.test_id}": row for row in rows}


def open_change(session: Session, repository_id: int, kind: str, *, benchmark_id: int | None = None,
                test_id: str | None = None) -> Change | None:
    return session.exec(select(Change).where(
        Change.repository_id == repository_id, Change.kind == kind,
        Change.benchmark_id == benchmark_id, Change.test_id == test_id, col(Change.state).in_(OPEN_STATES),
    )).first()


def new_change(session: Session, repository_id: int, run_id: int | None, device_id: int | None,
               good: Commit | None, bad: Commit, **fields: object) -> Change:
    """A change first seen between ``good`` (last good measured commit) and ``bad``.

    The first bad commit is known when nothing unmeasured lies between the two; otherwise
    the commits in between are recorded for ``bisect`` to narrow down on ``device_id``.
    """
    change = Change(repository_id=repository_id, detected_run_id=run_id, **fields)  # type: ignore[arg-type]
    change.range_start_sha = good.sha if good else None
    change.range_end_sha = bad.sha
    if good is None or good.sha in bad.parents:
        change.first_bad_commit_id = bad.id
    else:
        repository = session.get(Repository, repository_id)
        assert repository is not None
        between = commits_between(repository, good.sha, bad.sha)[:-1]
        change.details = {**change.details, "bisect_range": between, "device_id": device_id}
        if not between:
            change.first_bad_commit_id = bad.id
    session.add(change)
    session.flush()
    return change


def _flaky(session: Session, commit_id: int, suite: str, test_id: str) -> bool:
    """Both outcomes of one test on one commit (any run, any device): the test is flaky."""
    outcomes = set(session.exec(
        select(TestOutcome.outcome).join(Run, col(TestOutcome.run_id) == col(Run.id))
        .where(Run.commit_id == commit_id, TestOutcome.suite == suite, TestOutcome.test_id == test_id)
    ).all())
    return "passed" in outcomes and bool(outcomes & correctness.FAILING)


def _correctness(session: Session, run: Run, head_commit: Commit, head_rows: dict[str, TestOutcome],
                 base_rows: dict[str, TestOutcome] | None, base_commit: Commit | None,
                 summary: AnalysisSummary) -> None:
    head = {key: row.outcome for key, row in head_rows.items()}
    base_map = {k: r.outcome for k, r in base_rows.items()} if base_rows is not None else None
    for key in correctness.new_failures(base_map, head):
        row = head_rows[key]
        existing = open_change(session, run.repository_id, "correctness-failure", test_id=row.test_id)
        if existing is not None:
            continue
        change = new_change(session, run.repository_id, run.id, run.device_id, base_commit, head_commit,
                            kind="correctness-failure",
                            suite=row.suite, test_id=row.test_id, details={"message": row.message[:2000]})
        summary.changes.append(change.id)  # type: ignore[arg-type]
        if run.trigger == "bisect" and _passes_at_tip(session, run, row.suite, row.test_id):
            # Found while bisecting something else: the branch's newest run already passes it.
            change.state = "fixed"
            change.details = {**change.details, "fixed_at": "a later commit"}
            summary.fixed.append(change.id)  # type: ignore[arg-type]
    for key, row in head_rows.items():
        open_failure = open_change(session, run.repository_id, "correctness-failure", test_id=row.test_id)
        if open_failure is None:
            continue
        if _flaky(session, run.commit_id, row.suite, row.test_id):
            open_failure.details = {**open_failure.details, "flaky": True}
            session.add(open_failure)
        # A failure whose test passes again on a later commit is fixed, whoever fixed it.
        elif row.outcome == "passed" and run.trigger != "bisect":
            open_failure.state = "fixed"
            open_failure.details = {**open_failure.details, "fixed_in_run": run.id, "fixed_at": head_commit.sha}
            session.add(open_failure)
            summary.fixed.append(open_failure.id)  # type: ignore[arg-type]


def _passes_at_tip(session: Session, run: Run, suite: str, test_id: str) -> bool:
    tip = session.exec(
        select(Run).join(Commit, col(Run.commit_id) == col(Commit.id))
        .where(Run.repository_id == run.repository_id, Run.device_id == run.device_id,
               col(Run.state).in_(("succeeded", "failed")))
        .order_by(col(Commit.committed_at).desc(), col(Run.id).desc())
    ).first()
    if tip is None or tip.commit_id == run.commit_id:
        return False
    outcome = session.exec(select(TestOutcome.outcome).where(
        TestOutcome.run_id == tip.id, TestOutcome.suite == suite, TestOutcome.test_id == test_id)).first()
    return outcome == "passed"


def _numerics(session: Session, run: Run, head_commit: Commit, head_rows: dict[str, TestOutcome],
              base_rows: dict[str, TestOutcome], base_commit: Commit, summary: AnalysisSummary) -> None:
    """A case whose measured error grew by ``NUMERICS_DRIFT_FACTOR`` is drifting, even while it passes."""
    for key, row in head_rows.items():
        drifting = open_change(session, run.repository_id, "numerics-drift", test_id=row.test_id)
        if drifting is not None and run.trigger != "bisect":
            value = getattr(row, drifting.details.get("metric", "max_abs_err"))
            if value is not None and value <= NUMERICS_DRIFT_FACTOR * max(drifting.details.get("before") or 0.0,
                                                                          NUMERICS_ERROR_FLOOR):
                drifting.state = "fixed"
                drifting.details = {**drifting.details, "fixed_in_run": run.id, "fixed_at": head_commit.sha}
                session.add(drifting)
                summary.fixed.append(drifting.id)  # type: ignore[arg-type]
        if row.outcome in correctness.FAILING:
            continue  # a failing case is a correctness failure, not a drift
        old = base_rows.get(key)
        for metric in ("max_abs_err", "max_rel_err"):
            before = getattr(old, metric) if old else None
            after = getattr(row, metric)
            if before is None or after is None or after < NUMERICS_ERROR_FLOOR:
                continue
            if after <= NUMERICS_DRIFT_FACTOR * max(before, NUMERICS_ERROR_FLOOR):
                continue
            if drifting is not None and drifting.state in OPEN_STATES:
                break
            change = new_change(
                session, run.repository_id, run.id, run.device_id, base_commit, head_commit,
                kind="numerics-drift", suite=row.suite,
                test_id=row.test_id, change_pct=(after / max(before, NUMERICS_ERROR_FLOOR) - 1) * 100,
                details={"metric": metric, "before": before, "after": after},
            )
            summary.changes.append(change.id)  # type: ignore[arg-type]
            break


# -- performance candidates ---------------------------------------------------------------


def series_points(session: Session, benchmark_id: int, device_id: int, limit: int = SERIES_LIMIT) -> list[SeriesPoint]:
    """One median per commit (the latest run's) on one device, oldest commit first."""
    rows = session.exec(
        select(Commit.id, Commit.sha, Measurement.median, Run.id)
        .join(Run, col(Measurement.run_id) == col(Run.id))
        .join(Commit, col(Run.commit_id) == col(Commit.id))
        .where(Measurement.benchmark_id == benchmark_id, Run.device_id == device_id)
        .order_by(col(Commit.committed_at).desc(), col(Run.id).desc()).limit(limit * 2)
    ).all()
    seen: dict[int, SeriesPoint] = {}
    for commit_id, sha, median, _ in rows:
        seen.setdefault(commit_id, SeriesPoint(commit_id, sha, median))  # type: ignore[arg-type]
    return list(reversed(list(seen.values())[:limit]))


def _performance(session: Session, run: Run, head_commit: Commit, base: Run | None, base_commit: Commit | None,
                 summary: AnalysisSummary) -> None:
    repository = session.get(Repository, run.repository_id)
    device = session.get(Device, run.device_id)
    assert repository is not None and device is not None
    measurements = session.exec(select(Measurement).where(Measurement.run_id == run.id)).all()
    histories: dict[int, list[SeriesPoint]] = {}
    pairs: set[tuple[str, str]] = set()
    for measurement in measurements:
        points = histories[measurement.benchmark_id] = series_points(session, measurement.benchmark_id, device.id)  # type: ignore[arg-type]
        for cp in changepoints.detect([p.median for p in points]):
            pairs.add((points[cp.index - 1].sha, points[cp.index].sha))
    if base is not None and base_commit is not None and _adjacent_moved(session, run, base, measurements, histories):
        pairs.add((base_commit.sha, head_commit.sha))
    covered = _open_perf_changes(session, repository.id)  # type: ignore[arg-type]
    for good, bad in sorted(pairs):
        if confirmation_for(session, repository, device, good, bad) is not None:
            continue  # decided (or being decided) already
        if _covers(covered, good, bad):
            continue
        summary.followups.append(Confirm(repository.id, device.id, good, bad))  # type: ignore[arg-type]


def _adjacent_moved(session: Session, run: Run, base: Run, measurements: Iterable[Measurement],
                    histories: dict[int, list[SeriesPoint]]) -> bool:
    """Does any benchmark differ from what came before beyond the series' run-to-run noise?

    Two tests, either enough for a candidate (the A/B decides): the samples against the baseline
    run's, and the median against the level of the last few commits — so one baseline run that
    happened to be slow cannot hide a real slowdown behind it.
    """
    base_rows = {m.benchmark_id: m for m in session.exec(select(Measurement).where(Measurement.run_id == base.id))}
    for m in measurements:
        old = base_rows.get(m.benchmark_id)
        benchmark = session.get(Benchmark, m.benchmark_id)
        if old is None or benchmark is None:
            continue
        points = histories[m.benchmark_id]
        here = next((i for i, p in enumerate(points) if p.commit_id == run.commit_id), len(points))
        before = [p.median for p in points[:here]]
        verdict = compare.compare(old.samples, m.samples, higher_is_better=benchmark.higher_is_better,
                                  alpha=ADJACENT_ALPHA, run_noise=compare.run_to_run_noise(before[-RUN_NOISE_HISTORY:]))
        if verdict.direction != "none":
            return True
        level = float(np.median(before[-LEVEL_POINTS:])) if before else 0.0
        if level > 0 and m.median > 0 and abs(math.log(m.median / level)) > math.log1p(verdict.threshold_pct / 100):
            return True
    return False


def _open_perf_changes(session: Session, repository_id: int) -> list[Change]:
    return list(session.exec(select(Change).where(
        Change.repository_id == repository_id, col(Change.kind).in_(("perf-regression", "perf-improvement")),
        col(Change.state).in_(OPEN_STATES),
    )).all())


def _covers(rows: list[Change], good: str, bad: str) -> bool:
    """Is ``good..bad`` already covered by an open perf change being tracked or narrowed?"""
    return any(
        (c.range_start_sha, c.range_end_sha) == (good, bad)
        or (c.details.get("bisect_range") and bad in c.details["bisect_range"])
        for c in rows
    )
