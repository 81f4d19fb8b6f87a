"""Feed one finished run and its baseline to ``service.analysis``; store the changes found.

The baseline of a run is the latest earlier-committed run of the same repository on the
same device (fingerprint) that produced results. Re-analysing a run adds nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlmodel import Session, col, select

from service.analysis import compare, correctness, fdr
from service.models import Benchmark, Change, Commit, Measurement, Run, TestOutcome

ALPHA = 0.01
OPEN_STATES = ("new", "acknowledged")


@dataclass
class AnalysisSummary:
    run_id: int
    baseline_run_id: int | None
    changes: list[int] = field(default_factory=list)
    fixed: list[int] = field(default_factory=list)


def baseline_run(session: Session, run: Run) -> Run | None:
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
    if run.state not in ("succeeded", "failed"):
        return summary
    head_commit = session.get(Commit, run.commit_id)
    base_commit = session.get(Commit, base.commit_id) if base else None
    # The head is the first bad commit only when nothing unmeasured lies between it and its base.
    adjacent = bool(base_commit and head_commit and base_commit.sha in head_commit.parents)
    _correctness(session, run, base, base_commit, adjacent, summary)
    if base is not None:
        _performance(session, run, base, base_commit, adjacent, summary)
    return summary


def _existing(session: Session, run: Run, kind: str, benchmark_id: int | None,
              test_id: str | None) -> Change | None:
    return session.exec(select(Change).where(
        Change.repository_id == run.repository_id, Change.kind == kind,
        Change.benchmark_id == benchmark_id, Change.test_id == test_id,
        col(Change.state).in_(OPEN_STATES),
    )).first()


def _new_change(run: Run, base_commit: Commit | None, adjacent: bool, **fields: object) -> Change:
    change = Change(repository_id=run.repository_id, detected_run_id=run.id, **fields)  # type: ignore[arg-type]
    change.range_start_sha = base_commit.sha if base_commit else None
    if adjacent or base_commit is None:
        change.first_bad_commit_id = run.commit_id
    return change


def _outcomes(session: Session, run_id: int) -> dict[str, tuple[str, TestOutcome]]:
    rows = session.exec(select(TestOutcome).where(TestOutcome.run_id == run_id)).all()
    return {f"{row.suite}::{row.test_id}": (row.outcome, row) for row in rows}


def _correctness(session: Session, run: Run, base: Run | None, base_commit: Commit | None,
                 adjacent: bool, summary: AnalysisSummary) -> None:
    head_rows = _outcomes(session, run.id)  # type: ignore[arg-type]
    head = {key: outcome for key, (outcome, _) in head_rows.items()}
    base_map = {k: o for k, (o, _) in _outcomes(session, base.id).items()} if base else None  # type: ignore[arg-type]
    head_commit = session.get(Commit, run.commit_id)
    for key in correctness.new_failures(base_map, head):
        row = head_rows[key][1]
        if _existing(session, run, "correctness-failure", None, row.test_id):
            continue
        change = _new_change(run, base_commit, adjacent, kind="correctness-failure",
                             suite=row.suite, test_id=row.test_id,
                             details={"message": row.message[:2000]})
        change.range_end_sha = head_commit.sha if head_commit else None
        session.add(change)
        session.flush()
        summary.changes.append(change.id)  # type: ignore[arg-type]
    # A failure whose test passes again is fixed, whoever fixed it.
    for key, outcome in head.items():
        if outcome != "passed":
            continue
        row = head_rows[key][1]
        open_change = _existing(session, run, "correctness-failure", None, row.test_id)
        if open_change is not None:
            open_change.state = "fixed"
            open_change.details = {**open_change.details, "fixed_in_run": run.id}
            session.add(open_change)
            summary.fixed.append(open_change.id)  # type: ignore[arg-type]


def _history(session: Session, run: Run, benchmark_id: int, limit: int = 30) -> list[float]:
    """Medians of this series on this device before ``run``'s commit, oldest first."""
    commit = session.get(Commit, run.commit_id)
    if commit is None or commit.committed_at is None:
        return []
    rows = session.exec(
        select(Measurement.median).join(Run, col(Measurement.run_id) == col(Run.id))
        .join(Commit, col(Run.commit_id) == col(Commit.id))
        .where(Measurement.benchmark_id == benchmark_id, Run.device_id == run.device_id,
               col(Commit.committed_at) < commit.committed_at)
        .order_by(col(Commit.committed_at).desc()).limit(limit)
    ).all()
    return list(reversed(rows))


def _performance(session: Session, run: Run, base: Run, base_commit: Commit | None,
                 adjacent: bool, summary: AnalysisSummary) -> None:
    head_rows = session.exec(select(Measurement).where(Measurement.run_id == run.id)).all()
    base_rows = {m.benchmark_id: m for m in
                 session.exec(select(Measurement).where(Measurement.run_id == base.id)).all()}
    pairs = [(m, base_rows[m.benchmark_id]) for m in head_rows if m.benchmark_id in base_rows]
    benchmarks = {b.id: b for b in session.exec(
        select(Benchmark).where(col(Benchmark.id).in_([m.benchmark_id for m, _ in pairs]))).all()}
    verdicts = [
        compare.compare(b.samples, m.samples, higher_is_better=benchmarks[m.benchmark_id].higher_is_better,
                        alpha=1.0, run_noise=compare.run_to_run_noise(_history(session, run, m.benchmark_id)))
        for m, b in pairs
    ]
    adjusted = fdr.adjust([v.p_value for v in verdicts])
    head_commit = session.get(Commit, run.commit_id)
    for (measurement, _), verdict, q_value in zip(pairs, verdicts, adjusted):
        if q_value >= ALPHA or verdict.direction == "none":
            continue
        kind = "perf-regression" if verdict.direction == "regression" else "perf-improvement"
        # Each run's verdict is stored once; a later, separate slowdown is a new change.
        if session.exec(select(Change).where(Change.detected_run_id == run.id,
                                             Change.benchmark_id == measurement.benchmark_id)).first():
            continue
        change = _new_change(
            run, base_commit, adjacent, kind=kind, benchmark_id=measurement.benchmark_id,
            suite=benchmarks[measurement.benchmark_id].suite, change_pct=verdict.change_pct,
            ci_low=verdict.ci_low, ci_high=verdict.ci_high, p_value=q_value,
            details={"threshold_pct": verdict.threshold_pct, "reason": verdict.reason},
        )
        change.range_end_sha = head_commit.sha if head_commit else None
        session.add(change)
        session.flush()
        summary.changes.append(change.id)  # type: ignore[arg-type]
