"""Turn a finished confirmation A/B into stored changes.

The candidate came from separate runs; the A/B re-measured both commits interleaved on one
device, so only what the A/B finds significant and larger than its threshold is stored.
A candidate the A/B does not confirm leaves its comparison behind as the record that it was
looked at, so it is never asked again.
"""

from __future__ import annotations

from sqlmodel import Session, col, select

from service.core.models import Change, Commit, Comparison, Run
from service.flows.detection import OPEN_STATES, new_change
from service.records.comparisons import results_of

RETURN_TOLERANCE = 0.02  # a series within 2 % (or the A/B threshold) of its old level has returned


def apply(session: Session, comparison_id: int) -> list[int]:
    """Store the confirmed changes of a ``confirm`` comparison; the ids created."""
    comparison = session.get(Comparison, comparison_id)
    if comparison is None or comparison.purpose != "confirm" or comparison.state not in ("succeeded", "failed"):
        return []
    if comparison.details.get("applied"):
        return []
    good = session.get(Commit, comparison.base_commit_id)
    bad = session.get(Commit, comparison.head_commit_id)
    assert good is not None and bad is not None
    run = session.exec(select(Run).where(Run.commit_id == bad.id, Run.device_id == comparison.device_id)
                       .order_by(col(Run.id).desc())).first()
    created: list[int] = []
    for result, benchmark in results_of(session, comparison_id):
        if result.direction not in ("regression", "improvement"):
            continue
        kind = "perf-regression" if result.direction == "regression" else "perf-improvement"
        if session.exec(select(Change).where(
                Change.benchmark_id == benchmark.id, Change.kind == kind,
                Change.range_end_sha == bad.sha, col(Change.state).in_(OPEN_STATES))).first():
            continue
        change = new_change(
            session, comparison.repository_id, run.id if run else None, comparison.device_id, good, bad,
            kind=kind, benchmark_id=benchmark.id, suite=benchmark.suite, change_pct=result.change_pct,
            ci_low=result.ci_low, ci_high=result.ci_high, p_value=result.q_value,
            details={"before": result.base_median, "after": result.head_median, "comparison_id": comparison_id,
                     "threshold_pct": result.threshold_pct, "mde_pct": result.mde_pct,
                     "noise_pct": result.noise_pct, "rounds": len(result.base_values)},
        )
        created.append(change.id)  # type: ignore[arg-type]
        if kind == "perf-improvement":
            _mark_returned(session, change, result.threshold_pct)
    comparison.details = {**comparison.details, "applied": True, "changes": created}
    session.add(comparison)
    return created


def _mark_returned(session: Session, improvement: Change, threshold_pct: float | None) -> None:
    """An open regression of this series whose old level is back is fixed."""
    tolerance = max(RETURN_TOLERANCE, (threshold_pct or 0.0) / 100.0)
    level = improvement.details.get("after")
    if not level:
        return
    for regression in session.exec(select(Change).where(
            Change.benchmark_id == improvement.benchmark_id, Change.kind == "perf-regression",
            col(Change.state).in_(OPEN_STATES))).all():
        before = regression.details.get("before")
        if before and level <= before * (1 + tolerance):
            regression.state = "fixed"
            regression.details = {**regression.details, "fixed_by_change": improvement.id}
            session.add(regression)
