"""What ``roofwatch run`` prints per commit: its newest run, the tests and benchmarks it stored, the
changes it showed, the candidates no A/B has confirmed yet and the suites that did not pass."""

from __future__ import annotations

from collections.abc import Sequence

from sqlmodel import Session, col, select

from roofwatch.common.vocabulary import PERFORMANCE_KINDS
from roofwatch.service.analysis import lifecycle
from roofwatch.service.core.models import Benchmark, Change, Measurement, Run, SuiteExecution, TestOutcome
from roofwatch.service.records.changes import shown
from roofwatch.service.records.runs import find_commit

OUTPUT_TAIL_LINES = 15  # of a failed suite's output, printed under the summary


def newest_runs(session: Session, repository_id: int, commits: Sequence[tuple[str, str]]) -> list[dict[str, object]]:
    """The newest run of each commit (``(sha, message)``), with counts for ``roofwatch run``'s summary."""
    rows: list[dict[str, object]] = []
    for sha, message in commits:
        commit = find_commit(session, repository_id, sha)
        if commit is None:
            continue
        run = session.exec(select(Run).where(Run.commit_id == commit.id)
                           .order_by(Run.id.desc())).first()  # type: ignore[union-attr]
        if run is None:
            continue
        outcomes = session.exec(select(TestOutcome.outcome).where(TestOutcome.run_id == run.id)).all()
        measurements = session.exec(select(Measurement.id).where(Measurement.run_id == run.id)).all()
        changes = session.exec(select(Change).where(Change.detected_run_id == run.id, shown())).all()
        unconfirmed = session.exec(select(Change, Benchmark).where(
            Change.detected_run_id == run.id, col(Change.phase) != lifecycle.CONFIRMED,
            col(Change.kind).in_(PERFORMANCE_KINDS), Change.benchmark_id == Benchmark.id)
            .order_by(col(Change.id))).all()
        not_passed = session.exec(select(SuiteExecution).where(
            SuiteExecution.run_id == run.id, SuiteExecution.status != "passed")
            .order_by(SuiteExecution.id)).all()  # type: ignore[arg-type]
        rows.append({
            "run": run.id, "sha": sha, "title": message.splitlines()[0] if message else "",
            "branch": run.branch or None, "branch_base": run.base_sha if run.branch else None,
            "state": run.state, "passed": sum(o == "passed" for o in outcomes),
            "failed": sum(o in ("failed", "error") for o in outcomes),
            "benchmarks": len(measurements),
            "changes": sorted({c.kind for c in changes}), "candidates": [candidate(c, b) for c, b in unconfirmed],
            "reason": run.error,
            "analysis": run.analysis_state, "analysis_error": run.analysis_error,
            "suites": [{"name": s.name, "status": s.status, "reason": s.reason, "exit_code": s.exit_code,
                        "output_tail": "\n".join(s.output_tail.splitlines()[-OUTPUT_TAIL_LINES:])}
                       for s in not_passed],
        })
    return rows


def candidate(change: Change, benchmark: Benchmark) -> dict[str, object]:
    """A step this run's history showed that no A/B has confirmed: its size and where it stands, never a
    direction — one process per commit cannot tell a slower kernel from a slower process."""
    before, after = change.details.get("before"), change.details.get("after")
    step = 100 * (after / before - 1) if isinstance(before, float | int) and isinstance(after, float | int) \
        and before > 0 else None
    return {"suite": benchmark.suite, "benchmark": benchmark.name, "step_pct": step, "phase": change.phase,
            "good": change.range_start_sha, "bad": change.range_end_sha,
            "why": str(change.details.get("rejected") or "")}
