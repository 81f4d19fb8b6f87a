"""A/B comparisons in the database: create one, store what a worker measured, decide.

A comparison is decided from its rounds alone (``roofwatch.service.analysis.abtest``) — never from
history — so a pull request's verdict depends only on what was measured in its own job.
A new test failure on the head that does not also fail on the base makes the verdict
``failure`` whatever the timings say.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict

from sqlmodel import Session, select

from roofwatch.common.envelope import ENVELOPE_VERSION, ABEnvelope, MeasurementRecord, RoundRecord
from roofwatch.common.jobs import ABJob
from roofwatch.common.redaction import redact_json
from roofwatch.roofline import RooflineError
from roofwatch.service.analysis import abtest, correctness
from roofwatch.service.analysis.ab_rounds import paired_rounds, round_verdicts
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.models import Benchmark, Commit, Comparison, ComparisonResult, Device, Repository, utcnow
from roofwatch.service.core.reports import BenchmarkVerdictRow, ComparisonReport
from roofwatch.service.records import compiled_artifacts
from roofwatch.service.records.ingest import IngestError, upsert_benchmark, upsert_device
from roofwatch.service.records.roofline import fraction_of_roofline, peaks_for
from roofwatch.service.records.suite_configs import job_fields


def create_comparison(session: Session, repository: Repository, base: Commit, head: Commit, key: str,
                      purpose: str = "manual", run_id: int | None = None) -> Comparison:
    """The comparison for ``key``, created queued unless it already exists (idempotent)."""
    found = session.exec(select(Comparison).where(Comparison.idempotency_key == key)).first()
    if found is not None:
        return found
    comparison = Comparison(repository_id=repository.id, base_commit_id=base.id, head_commit_id=head.id,  # type: ignore[arg-type]
                            purpose=purpose, run_id=run_id, idempotency_key=key)
    session.add(comparison)
    session.flush()
    return comparison


def ab_job_for(comparison: Comparison, repository: Repository, base: Commit, head: Commit, data_dir: str,
               suite_timeout_s: float, output_limit: int, max_rounds: int, min_rounds: int = 3,
               budget_s: float | None = None) -> ABJob:
    """The worker's A/B job, carrying the repository's stored suites as a run's job does.

    ``budget_s`` (default ``ROOFWATCH_AB_BUDGET_S``) bounds the wall time of the rounds.
    """
    if budget_s is None:
        budget_s = get_settings().ab_budget_s
    return ABJob(
        budget_s=budget_s or None,
        run_id=comparison.run_id,
        comparison_id=comparison.id, idempotency_key=comparison.idempotency_key,  # type: ignore[arg-type]
        repository=repository.full_name, clone_url=repository.clone_url, base_sha=base.sha,
        head_sha=head.sha, data_dir=data_dir, min_rounds=min_rounds, max_rounds=max(min_rounds, max_rounds),
        suite_timeout_s=suite_timeout_s, output_limit=output_limit, suite_network=repository.suite_network,
        **job_fields(comparison, repository),
    )


def parse_ab_envelope(data: dict[str, object]) -> ABEnvelope:
    if data.get("version") != ENVELOPE_VERSION or data.get("kind") != "ab":
        raise IngestError(f"not an A/B envelope of version {ENVELOPE_VERSION}: "
                          f"version={data.get('version')!r} kind={data.get('kind')!r}")
    return ABEnvelope.model_validate(redact_json(data))


def ingest_ab(session: Session, envelope: ABEnvelope) -> Comparison:
    """Store the rounds' verdicts. A redelivered envelope changes nothing."""
    comparison = session.get(Comparison, envelope.comparison_id)
    if comparison is None:
        raise IngestError(f"envelope for unknown comparison {envelope.comparison_id}")
    if comparison.idempotency_key != envelope.idempotency_key:
        raise IngestError(f"envelope key {envelope.idempotency_key!r} does not match comparison {comparison.id}")
    if comparison.finished_at is not None:
        return comparison
    repository = session.get(Repository, comparison.repository_id)
    assert repository is not None
    device = upsert_device(session, envelope.device)
    comparison.device_id = device.id
    comparison.rounds = len({r.index for r in envelope.rounds})
    comparison.error = envelope.reason

    new_failures, fixed = _correctness(envelope.rounds)
    verdicts = _store_results(session, comparison, repository, device, envelope)
    spent = (envelope.finished_at - envelope.started_at).total_seconds()
    comparison.details = {
        **comparison.details, "new_failures": new_failures, "fixed": fixed,
        "mde_pct": max((r.mde_pct for r in verdicts if r.mde_pct is not None), default=None),
        "min_effect_pct": 100 * envelope.min_effect, "budget_s": envelope.budget_s, "spent_s": spent,
        "stop_reason": envelope.stop_reason,
        "compiled": compiled_artifacts.ab_summary(envelope.rounds),
        "suites_source": envelope.suites_source,
    }
    if comparison.state == "cancelled":
        comparison.verdict = "cancelled"  # measured after all, but nobody is waiting for the verdict
    elif envelope.status == "errored":
        comparison.state, comparison.verdict = "errored", "errored"
    else:
        comparison.state = "succeeded" if envelope.status == "succeeded" else "failed"
        perf = abtest.overall([_as_verdict(r) for r in verdicts])
        comparison.verdict = "failure" if new_failures else perf
    comparison.finished_at = utcnow()
    session.add(comparison)
    session.flush()
    return comparison


def _outcomes(rounds: list[RoundRecord], side: str) -> dict[str, tuple[str, str]]:
    first = [r for r in rounds if r.side == side and r.index == 0]
    return {f"{s.name}::{o.test_id}": (o.outcome, o.message)
            for r in first for s in r.suites for o in s.outcomes}


def _correctness(rounds: list[RoundRecord]) -> tuple[list[dict[str, str]], list[str]]:
    base, head = _outcomes(rounds, "base"), _outcomes(rounds, "head")
    base_map = {k: v[0] for k, v in base.items()}
    head_map = {k: v[0] for k, v in head.items()}
    new = [{"test_id": key.split("::", 1)[1], "suite": key.split("::", 1)[0], "message": head[key][1][:2000]}
           for key in correctness.new_failures(base_map, head_map)]
    return new, correctness.fixed(base_map, head_map)


def _store_results(session: Session, comparison: Comparison, repository: Repository, device: Device,
                   envelope: ABEnvelope) -> list[ComparisonResult]:
    rounds = envelope.rounds
    records: dict[str, tuple[str, MeasurementRecord]] = {}
    for record in rounds:
        for suite in record.suites:
            for m in suite.measurements:
                records.setdefault(f"{suite.name}::{m.name}", (suite.name, m))
    pairs = paired_rounds(rounds)
    keys = sorted(pairs)
    benchmarks: dict[str, Benchmark] = {
        key: upsert_benchmark(session, repository, records[key][0], device, records[key][1]) for key in keys
    }
    decided = round_verdicts(rounds, envelope.min_effect, envelope.min_effects,
                             {k: benchmarks[k].higher_is_better for k in keys})
    rows: list[ComparisonResult] = []
    for key in keys:
        verdict = decided[key]
        base_values, head_values = pairs[key]
        benchmark = benchmarks[key]
        base_median, head_median = statistics.median(base_values), statistics.median(head_values)
        fields = {k: v for k, v in asdict(verdict).items() if k not in ("rounds", "confidence", "rounds_needed")}
        for name in ("threshold_pct", "mde_pct"):
            if fields[name] == float("inf"):
                fields[name] = None  # too few rounds: there was no threshold
        row = ComparisonResult(
            comparison_id=comparison.id, benchmark_id=benchmark.id,  # type: ignore[arg-type]
            base_values=base_values, head_values=head_values, base_median=base_median, head_median=head_median,
            base_roofline=_roofline(device, benchmark, base_median),
            head_roofline=_roofline(device, benchmark, head_median), **fields,
        )
        session.add(row)
        rows.append(row)
    session.flush()
    return rows


def _as_verdict(row: ComparisonResult) -> abtest.ABVerdict:
    return abtest.ABVerdict(row.change_pct, row.ci_low, row.ci_high, row.p_value, row.q_value, row.noise_pct,
                            row.threshold_pct or 0.0, row.mde_pct or 0.0, len(row.base_values),
                            row.direction, row.reason)  # type: ignore[arg-type]


def _roofline(device: Device, benchmark: Benchmark, median: float) -> float | None:
    peaks = peaks_for(device)
    if peaks is None or not benchmark.flops or not benchmark.bytes or median <= 0:
        return None
    try:
        return fraction_of_roofline(peaks, benchmark.flops, benchmark.bytes, median, benchmark.dtype)
    except RooflineError:
        return None  # reported as a harness error where the run itself is ingested


def results_of(session: Session, comparison_id: int) -> list[tuple[ComparisonResult, Benchmark]]:
    rows = session.exec(select(ComparisonResult, Benchmark)
                        .where(ComparisonResult.comparison_id == comparison_id,
                               ComparisonResult.benchmark_id == Benchmark.id)).all()
    return sorted(((r, b) for r, b in rows), key=lambda rb: (rb[1].suite, rb[1].name))


def comparison_report(session: Session, comparison_id: int,
                      results: list[tuple[ComparisonResult, Benchmark]] | None = None) -> ComparisonReport:
    """A comparison as JSON-ready data: verdict, device, and one row per benchmark.

    What ``roofwatch compare --format json`` prints and what PR reports are rendered from.
    Times are in the benchmark's ``unit`` (seconds for pytest-benchmark). ``results`` are the
    comparison's ``results_of``, for a caller that has read them already.
    """
    comparison = session.get(Comparison, comparison_id)
    if comparison is None:
        raise LookupError(f"no comparison {comparison_id}")
    base = session.get(Commit, comparison.base_commit_id)
    head = session.get(Commit, comparison.head_commit_id)
    device = session.get(Device, comparison.device_id) if comparison.device_id else None
    rows: list[BenchmarkVerdictRow] = [{
        "benchmark": b.name, "suite": b.suite, "unit": b.unit, "higher_is_better": b.higher_is_better,
        "base_median": r.base_median, "head_median": r.head_median,
        "change_pct": r.change_pct, "ci_low": r.ci_low, "ci_high": r.ci_high, "p_value": r.p_value,
        "q_value": r.q_value, "noise_pct": r.noise_pct, "threshold_pct": r.threshold_pct,
        "mde_pct": r.mde_pct, "direction": r.direction, "reason": r.reason, "rounds": len(r.base_values),
        "base_roofline": r.base_roofline, "head_roofline": r.head_roofline,
    } for r, b in (results if results is not None else results_of(session, comparison_id))]
    # The benchmark whose noise sets the headline's smallest detectable change (the largest).
    measured = [(mde, r["benchmark"]) for r in rows if (mde := r.get("mde_pct")) is not None]
    return {
        "mde_benchmark": max(measured)[1] if measured else None,
        "id": comparison.id, "base": base.sha if base else None, "head": head.sha if head else None,
        "state": comparison.state, "verdict": comparison.verdict, "rounds": comparison.rounds,
        "purpose": comparison.purpose, "device": device.device_class if device else None,
        "error": comparison.error, "mde_pct": comparison.details.get("mde_pct"),
        "new_failures": comparison.details.get("new_failures", []),
        "fixed": comparison.details.get("fixed", []), "benchmarks": rows,
        "compiled": comparison.details.get("compiled", {}),
        "suites_source": comparison.details.get("suites_source", ""),
        "min_effect_pct": comparison.details.get("min_effect_pct"),
        "budget_s": comparison.details.get("budget_s"), "spent_s": comparison.details.get("spent_s"),
        "stop_reason": comparison.details.get("stop_reason", ""),
    }
