"""A/B comparisons in the database: create one, store what a worker measured, decide.

A comparison is decided from its rounds alone (``roofwatch.ab.abtest``) — never from
history — so a pull request's verdict depends only on what was measured in its own job.
A new test failure on the head that does not also fail on the base makes the verdict
``failure`` whatever the timings say.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

from sqlmodel import Session, select

from roofwatch.ab import abtest
from roofwatch.ab.rounds import account, paired_rounds, round_verdicts
from roofwatch.common.envelope import ENVELOPE_VERSION, ABEnvelope, MeasurementRecord, RoundRecord
from roofwatch.common.jobs import ABJob
from roofwatch.common.metrics import is_memory_suite
from roofwatch.common.redaction import redact_json
from roofwatch.common.vocabulary import RunState
from roofwatch.roofline import RooflineError
from roofwatch.service.analysis import correctness, failure_groups
from roofwatch.service.analysis.causes import causes, judged
from roofwatch.service.analysis.dependencies import environment_changes
from roofwatch.service.core.comparison_details import add_details, details_of
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.models import Benchmark, Commit, Comparison, ComparisonResult, Device, Repository, utcnow
from roofwatch.service.core.reports import (
    BenchmarkVerdictRow,
    ComparisonReport,
    Environments,
    Judgement,
    MissingBenchmark,
    NamedBenchmark,
    NewFailure,
    SettingChangeRow,
)
from roofwatch.service.core.verdict_rows import stored_fields, stored_verdict, verdict_row
from roofwatch.service.records import acceptances, compiled_artifacts
from roofwatch.service.records.ingest import IngestError, stored_order, upsert_benchmark, upsert_device
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
               budget_s: float | None = None, only: tuple[str, ...] = ()) -> ABJob:
    """The worker's A/B job, carrying the repository's stored suites as a run's job does.

    ``budget_s`` (default ``ROOFWATCH_AB_BUDGET_S``) bounds the wall time of the rounds; ``only``
    (a confirmation's candidates, ``suite::name``) limits what is measured.
    """
    settings = get_settings()
    if budget_s is None:
        budget_s = settings.ab_budget_s
    stored = job_fields(comparison, repository)
    return ABJob(
        budget_s=budget_s or None,
        run_id=comparison.run_id,
        comparison_id=comparison.id, idempotency_key=comparison.idempotency_key,  # type: ignore[arg-type]
        repository=repository.full_name, clone_url=repository.clone_url, base_sha=base.sha,
        head_sha=head.sha, data_dir=data_dir, min_rounds=min_rounds, max_rounds=max(min_rounds, max_rounds),
        suite_timeout_s=suite_timeout_s, output_limit=output_limit, suite_network=repository.suite_network,
        suites_toml=stored.get("suites_toml", ""), suites_label=stored.get("suites_label", ""),
        only=tuple(sorted(only)), later_rounds=settings.ab_later_rounds,
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
    verdicts, adjusted = _store_results(session, comparison, repository, device, envelope)
    spent = (envelope.finished_at - envelope.started_at).total_seconds()
    add_details(
        comparison, new_failures=new_failures, fixed=fixed,
        mde_pct=max((r.mde_pct for r in verdicts if r.mde_pct is not None), default=None),
        min_effect_pct=100 * envelope.min_effect, budget_s=envelope.budget_s, spent_s=spent,
        # The level of the intervals decided with, and the higher one of each change's (suite::name).
        confidence=abtest.CONFIDENCE, adjusted_confidence=adjusted,
        stop_reason=envelope.stop_reason,
        compiled=compiled_artifacts.ab_summary(envelope.rounds),
        suites_source=envelope.suites_source,
        **judgement_details(envelope),
        rounds_run=rounds_run(envelope.rounds), left_open=envelope.left_open,
        **environment_details(envelope.rounds),
    )
    if envelope.max_rounds is not None:
        add_details(comparison, max_rounds=envelope.max_rounds)
    if comparison.state == RunState.CANCELLED:
        comparison.verdict = "cancelled"  # measured after all, but nobody is waiting for the verdict
    elif envelope.status == "errored":
        comparison.state, comparison.verdict = RunState.ERRORED, "errored"
    else:
        comparison.state = RunState.SUCCEEDED if envelope.status == RunState.SUCCEEDED else RunState.FAILED
        add_details(comparison, perf_verdict=abtest.overall([_as_verdict(r) for r in verdicts]))
        acceptances.settle(session, comparison)
    comparison.finished_at = utcnow()
    session.add(comparison)
    session.flush()
    return comparison


def judgement_details(envelope: ABEnvelope) -> Judgement:
    """What judged the comparison and where every benchmark of the base went, for ``details``.

    ``missing_on_head``: the base's benchmarks with no verdict, each with why — not reported,
    timed with other options, its suite broken on the head, or renamed by the head's own table
    (paired for this comparison, but a maintainer accepts such a rename like a deletion).
    """
    pairing = {**envelope.renamed, **envelope.head_renamed}
    unfinished = {s.name: s.reason or s.status for r in envelope.rounds if r.side == "head" and r.index == 0
                  for s in r.suites if s.status in ("errored", "timeout") or (s.kind == "benchmark" and s.status == "failed")}
    found = account(envelope.rounds, pairing, unfinished)
    trusted = account(envelope.rounds, envelope.renamed).paired
    missing = [_missing(key, reason) for key, reason in found.missing.items()]
    renamed: list[dict[str, Any]] = []
    for old, new in sorted(found.renamed.items()):
        pending = trusted.get(old) != new
        renamed.append({"from": _named(old), "to": _named(new), "pending": pending})
        if pending:
            missing.append(_missing(old, f"renamed to {new.split('::', 1)[1]} by the head's own "
                                         "[tool.roofwatch] renamed: paired here, counted once accepted"))
    return {
        "judged_by": envelope.judged_by, "missing_policy": envelope.missing_policy,
        "settings_changes": [SettingChangeRow(what=change.what, before=change.before, after=change.after)
                             for change in envelope.settings_changes],
        "missing_on_head": sorted(missing, key=lambda m: (m["suite"], m["benchmark"])),
        "new_on_head": [_named(key) for key in found.new], "renamed": renamed,
    }


def environment_details(rounds: list[RoundRecord]) -> Environments:
    """Each side's own environment per suite (round one's), and how the head's differs from the base's."""
    first = {(r.side, s.name): s.environment for r in rounds if r.index == 0 for s in r.suites if s.environment}
    if not first:
        return {}
    suites = sorted({name for _, name in first})
    changes = {name: found for name in suites
               if (found := environment_changes(first.get(("base", name), {}), first.get(("head", name), {})))}
    return {"environments": {side: {name: env for (s, name), env in first.items() if s == side}
                             for side in ("base", "head")},
            "environment_changes": changes}


NAMES_PER_PROCESS = 200  # benchmark names kept per process of a later round (round one: a count)


def rounds_run(rounds: list[RoundRecord]) -> list[dict[str, Any]]:
    """What each process of the comparison measured, in the order run: per suite, the benchmarks
    (names for a later round's selection, a count for round one's whole suites) and the order's seed."""
    out: list[dict[str, Any]] = []
    for record in rounds:
        suites = []
        for suite in record.suites:
            names = sorted(m.name for m in suite.measurements)
            row: dict[str, Any] = {"suite": suite.name, "kind": suite.kind, "status": suite.status,
                                   "duration_s": round(suite.duration_s, 3), "measured": len(names)}
            if suite.selected is not None:
                row["selected"] = suite.selected[:NAMES_PER_PROCESS]
                row["names"] = names[:NAMES_PER_PROCESS]
            if suite.order_seed is not None:
                row["order_seed"] = suite.order_seed
            if suite.order and suite.kind == "benchmark" and not is_memory_suite(suite.name):
                row |= {k: v for k, v in stored_order(suite.order_seed, suite.order).items() if k != "seed"}
            if suite.calibrations_reused:
                row["calibrations_reused"] = suite.calibrations_reused
            suites.append(row)
        out.append({"index": record.index, "side": record.side, "suites": suites})
    return out


def _named(key: str) -> NamedBenchmark:
    suite, name = key.split("::", 1)
    return {"suite": suite, "benchmark": name}


def _missing(key: str, reason: str) -> MissingBenchmark:
    return {**_named(key), "reason": reason}


def _outcomes(rounds: list[RoundRecord], side: str) -> dict[str, tuple[str, str]]:
    first = [r for r in rounds if r.side == side and r.index == 0]
    return {f"{s.name}::{o.test_id}": (o.outcome, o.message)
            for r in first for s in r.suites for o in s.outcomes}


def _correctness(rounds: list[RoundRecord]) -> tuple[list[NewFailure], list[str]]:
    """The head's new failures, one entry per test function (``failure_groups``): ``test_id`` its one
    test or its function, ``tests`` the failing parametrizations in the order the suite ran them,
    ``message`` the first one's failure text. And the tests it fixed."""
    base, head = _outcomes(rounds, "base"), _outcomes(rounds, "head")
    base_map = {k: v[0] for k, v in base.items()}
    head_map = {k: v[0] for k, v in head.items()}
    broken = set(correctness.new_failures(base_map, head_map))
    # Keyed suite::test id, so a function is never grouped with a namesake of another suite.
    groups = failure_groups.group_failures((key, head[key][1]) for key in head if key in broken)
    new: list[NewFailure] = [
        {"test_id": group.name.split("::", 1)[1], "suite": group.function.split("::", 1)[0],
         "message": group.message[:2000], "tests": [test.split("::", 1)[1] for test in group.tests]}
        for group in groups]
    return new, correctness.fixed(base_map, head_map)


def _store_results(session: Session, comparison: Comparison, repository: Repository, device: Device,
                   envelope: ABEnvelope) -> tuple[list[ComparisonResult], dict[str, float]]:
    """The results' rows, and the confidence of each interval shown at another level than ``abtest.CONFIDENCE``
    (a change's: adjusted for the benchmarks compared), by ``suite::name``."""
    rounds = envelope.rounds
    records: dict[str, tuple[str, MeasurementRecord]] = {}
    for record in rounds:
        for suite in record.suites:
            for m in suite.measurements:
                records.setdefault(f"{suite.name}::{m.name}", (suite.name, m))
    pairing = {**envelope.renamed, **envelope.head_renamed}
    pairs = paired_rounds(rounds, pairing)
    keys = sorted(pairs)
    benchmarks: dict[str, Benchmark] = {
        key: upsert_benchmark(session, repository, records[key][0], device, records[key][1]) for key in keys
    }
    decided = round_verdicts(rounds, envelope.min_effect, envelope.min_effects,
                             {k: benchmarks[k].higher_is_better for k in keys}, pairing)
    why = causes(rounds, decided, pairing, envelope.changed_files,
                 environment_details(rounds).get("environment_changes", {}), {k: benchmarks[k].unit for k in keys})
    rows: list[ComparisonResult] = []
    adjusted: dict[str, float] = {}
    for key in keys:
        verdict = judged(decided[key], why.get(key))
        if verdict.confidence != abtest.CONFIDENCE:
            adjusted[key] = verdict.confidence
        attribution = dict(why.get(key) or {})
        if verdict.direction != decided[key].direction:
            attribution["moved"] = decided[key].direction  # what the numbers alone said
        base_values, head_values = pairs[key]
        rows.append(store_result(session, comparison, benchmarks[key], device, verdict, base_values, head_values,
                                 attribution))
    session.flush()
    return rows, adjusted


def store_result(session: Session, comparison: Comparison, benchmark: Benchmark, device: Device,
                 verdict: abtest.ABVerdict, base_values: list[float], head_values: list[float],
                 attribution: dict[str, Any] | None = None) -> ComparisonResult:
    """One benchmark's verdict as its comparison row: the one way an A/B and an upload store a result.

    ``base_values``/``head_values``: what the verdict rests on (per-round medians of an A/B, an
    upload's one median per side); the row's medians and % of roofline are read from them.
    """
    base_median, head_median = statistics.median(base_values), statistics.median(head_values)
    row = ComparisonResult(
        comparison_id=comparison.id, benchmark_id=benchmark.id,  # type: ignore[arg-type]
        base_values=base_values, head_values=head_values, base_median=base_median, head_median=head_median,
        base_roofline=_roofline(device, benchmark, base_median),
        head_roofline=_roofline(device, benchmark, head_median), attribution=attribution or {},
        **stored_fields(verdict),
    )
    session.add(row)
    return row


def _as_verdict(row: ComparisonResult) -> abtest.ABVerdict:
    """A stored row as the verdict it was stored from (an unknown threshold or detectable change: infinite)."""
    return stored_verdict(row, len(row.base_values))


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
    details = details_of(comparison)
    renamed_to = {(r["from"]["suite"], r["from"]["benchmark"]): r["to"]["benchmark"]
                  for r in details.get("renamed", [])}
    # Stored since labels say the level; older comparisons were decided at the same one.
    level = float(details.get("confidence") or abtest.CONFIDENCE)
    adjusted = details.get("adjusted_confidence") or {}
    rows: list[BenchmarkVerdictRow] = [
        verdict_row(replace(_as_verdict(r), confidence=adjusted.get(f"{b.suite}::{b.name}", level)),
                    name=b.name, suite=b.suite, unit=b.unit, higher_is_better=b.higher_is_better,
                    base_median=r.base_median, head_median=r.head_median, rounds=len(r.base_values),
                    rooflines=(r.base_roofline, r.head_roofline), head_benchmark=renamed_to.get((b.suite, b.name)),
                    attribution=r.attribution)
        for r, b in (results if results is not None else results_of(session, comparison_id))]
    # The benchmark whose noise sets the headline's smallest detectable change (the largest).
    measured = [(mde, r["benchmark"]) for r in rows if (mde := r.get("mde_pct")) is not None]
    return {
        "mde_benchmark": max(measured)[1] if measured else None,
        "id": comparison.id, "base": base.sha if base else None, "head": head.sha if head else None,
        "state": comparison.state, "verdict": comparison.verdict, "rounds": comparison.rounds,
        "purpose": comparison.purpose, "device": device.device_class if device else None,
        "error": comparison.error, "mde_pct": details.get("mde_pct"), "confidence": level,
        "new_failures": details.get("new_failures", []),
        "fixed": details.get("fixed", []), "benchmarks": rows,
        "compiled": details.get("compiled", {}),
        "suites_source": details.get("suites_source", ""),
        "min_effect_pct": details.get("min_effect_pct"),
        "budget_s": details.get("budget_s"), "spent_s": details.get("spent_s"),
        "max_rounds": details.get("max_rounds"),
        "stop_reason": details.get("stop_reason", ""),
        "judged_by": details.get("judged_by", ""),
        "settings_changes": details.get("settings_changes", []),
        "missing_on_head": _missing_rows(comparison),
        "new_on_head": details.get("new_on_head", []),
        "missing_policy": details.get("missing_policy", "failure"),
        "environment_changes": details.get("environment_changes", {}),
    }


def _missing_rows(comparison: Comparison) -> list[MissingBenchmark]:
    """The missing benchmarks, each with who accepted it and when (as ``acceptances.settle`` recorded)."""
    details = details_of(comparison)
    accepted = {a["benchmark"]: a for a in details.get("accepted_missing", [])}
    rows: list[MissingBenchmark] = []
    for m in details.get("missing_on_head", []):
        row: MissingBenchmark = {"suite": m["suite"], "benchmark": m["benchmark"], "reason": m["reason"]}
        if (a := accepted.get(f"{m['suite']}::{m['benchmark']}")) is not None:
            row["accepted_by"], row["accepted_at"], row["accepted_via"] = a["by"], a["at"], a["via"]
        rows.append(row)
    return rows
