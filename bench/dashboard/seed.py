"""Fill PostgreSQL with a large, realistic roofwatch history, fast.

    python -m bench.dashboard.seed --database-url postgresql://postgres@127.0.0.1:5432/roofwatch_scale \\
        --benchmarks 1000 --commits 2000 [--seed 0] [--devices 2] [--reset]

One repository; ``--commits`` pushes to main, each measured once (trigger push) on one of the
fleet's GPUs; ``--benchmarks`` series, each measured at every commit (so 1,000 × 2,000 is 2 M
measurements); the changes at the steps those series take, with triage states; correctness
outcomes with a few failures and drifts; and a few A/B comparisons with their per-round values.

Rows go in with PostgreSQL COPY (psycopg 3), not the ORM: 2 M ORM inserts take the better part
of an hour, COPY a minute or two. Ids are assigned here, so the sequences are moved past them
afterwards, and the tables are analysed so the planner sees their real sizes at once.
Measurements are written commit by commit, the order ingest writes them in, so the table's
physical layout (which decides how many pages a query reads) is the one production has.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from sqlmodel import SQLModel

import roofwatch.service.core.models  # noqa: F401  (registers every table on SQLModel.metadata)
from bench.dashboard.history import CommitInfo, History, make_history
from bench.dashboard.workload import (
    DEVICE_CLASS,
    DTYPES,
    FLEET,
    GPU,
    Spec,
    noise_sigma,
    pick,
    roof_seconds,
    typical_seconds,
)
from roofwatch.service.core.db import migrate
from roofwatch.service.core.fingerprint import benchmark_fingerprint

REPOSITORY = "acme/kernels"
SAMPLES = 5  # values kept per measurement: enough for the IQR, small enough to keep 2 M rows sane
ROUNDS = 5  # A/B rounds per comparison
TRIAGE_WEIGHTS = {"new": 0.3, "acknowledged": 0.2, "expected": 0.15, "invalid": 0.1, "fixed": 0.25}
TRIAGE_NOTES = {"acknowledged": "looking into it", "expected": "accepted: the new path is exact for bf16",
                "invalid": "noisy runner, re-measured", "fixed": "fixed by the follow-up PR"}


def sqlalchemy_url(url: str) -> str:
    """The URL for SQLAlchemy/Alembic: a plain ``postgresql://`` one is mapped to psycopg 3."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def libpq_url(url: str) -> str:
    """The URL for psycopg itself, which takes no ``+driver``."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


@dataclass
class Plan:
    """Everything the seed writes, decided up front from one random generator."""

    specs: list[Spec]
    fleet: tuple[GPU, ...]
    history: History
    run_device: np.ndarray  # (commits,): index into fleet of the GPU each run used
    base_seconds: np.ndarray  # (benchmarks,): each series' median before any change
    sigma: np.ndarray  # (benchmarks,): each series' relative noise

    @property
    def commits(self) -> list[CommitInfo]:
        return self.history.commits


def make_plan(benchmarks: int, commits: int, seed: int, devices: int) -> Plan:
    rng = np.random.default_rng(seed)
    specs = pick(benchmarks, rng)
    fleet = FLEET[:devices]
    history = make_history(specs, commits, rng, seed)
    base = np.array([typical_seconds(s, fleet, rng) for s in specs])
    sigma = np.array([noise_sigma(t, rng) for t in base])
    return Plan(specs=specs, fleet=fleet, history=history, run_device=rng.integers(0, len(fleet), size=commits),
                base_seconds=base, sigma=sigma)


# -- COPY ------------------------------------------------------------------------------------


def copy_rows(cursor: psycopg.Cursor[Any], table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]],
              progress: Progress, task: TaskID) -> int:
    """COPY ``rows`` into ``table``; JSON columns arrive as already-encoded text."""
    statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns)))
    count = 0
    with cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row(row)
            count += 1
            if count % 1000 == 0:
                progress.advance(task, 1000)
    progress.update(task, completed=count, total=count)
    return count


def _fingerprint(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def _run_times(commit: CommitInfo) -> tuple[datetime, datetime, datetime]:
    """A push run: queued half a minute after the push, measured for about a quarter of an hour."""
    created = commit.committed_at + timedelta(seconds=30)
    return created, created + timedelta(minutes=2), created + timedelta(minutes=17)


def repository_rows(plan: Plan) -> Iterator[tuple[Any, ...]]:
    yield 1, REPOSITORY, f"https://github.com/{REPOSITORY}.git", "main", "maintainers-only", None, \
        plan.commits[0].committed_at


def commit_rows(plan: Plan) -> Iterator[tuple[Any, ...]]:
    for i, c in enumerate(plan.commits):
        yield i + 1, 1, c.sha, json.dumps(c.parents), c.author, c.message, c.committed_at, i + 1


def device_rows(plan: Plan) -> Iterator[tuple[Any, ...]]:
    for i, gpu in enumerate(plan.fleet):
        yield (i + 1, _fingerprint(DEVICE_CLASS, gpu.uuid), DEVICE_CLASS, gpu.uuid, "560.35.03", "12.6", "2.5.1",
               "3.1.0", gpu.peak_bandwidth, json.dumps(gpu.peak_flops), "measured", gpu.sm_clock_mhz, 700.0,
               50 * 1024 * 1024, gpu.hostname, plan.commits[0].committed_at)


def benchmark_rows(plan: Plan) -> Iterator[tuple[Any, ...]]:
    for i, s in enumerate(plan.specs):
        fingerprint = benchmark_fingerprint(REPOSITORY, "benchmarks", s.name, s.params, s.dtype, DEVICE_CLASS)
        yield (i + 1, fingerprint, 1, "benchmarks", s.name, s.params, s.dtype, s.shape_text, s.impl, DEVICE_CLASS,
               "s", False, s.flops, s.bytes)


# -- correctness -----------------------------------------------------------------------------


def correctness_tests(plan: Plan) -> list[str]:
    ops = sorted({s.op for s in plan.specs})
    return [f"test_{op}.py::test_{op}_matches_torch[{dtype}]" for op in ops for dtype in DTYPES]


@dataclass(frozen=True)
class Failure:
    """A correctness test failing from commit ``start`` up to (not including) ``end``."""

    test: int
    start: int
    end: int


@dataclass(frozen=True)
class Drift:
    """A test whose max error grew ``factor``-fold from commit ``start`` on."""

    test: int
    start: int
    factor: float


def correctness_events(plan: Plan, rng: np.random.Generator) -> tuple[list[Failure], list[Drift]]:
    count, tests = len(plan.commits), len(correctness_tests(plan))
    failures = []
    for _ in range(max(1, count // 150)):
        start = int(rng.integers(1, count))
        failures.append(Failure(int(rng.integers(tests)), start, min(count, start + int(rng.integers(1, 15)))))
    drifts = [Drift(int(rng.integers(tests)), int(rng.integers(1, count)), float(rng.uniform(8, 40)))
              for _ in range(max(1, count // 400))]
    return failures, drifts


ERROR_SCALE = {"fp32": 2e-6, "bf16": 8e-3, "fp16": 1e-3}
FAILURE_MESSAGE = ("AssertionError: Tensor-likes are not close!\n\nMismatched elements: 17 / 16777216 (0.0%)\n"
                   "Greatest absolute difference: 0.0625 at index (4095, 31999) (up to 0.016 allowed)")


def outcome_rows(plan: Plan, failures: list[Failure], drifts: list[Drift],
                 rng: np.random.Generator) -> Iterator[tuple[Any, ...]]:
    tests = correctness_tests(plan)
    failing = {(f.test, j) for f in failures for j in range(f.start, f.end)}
    row_id = 0
    for j in range(len(plan.commits)):
        errors = rng.uniform(0.3, 1.0, size=len(tests))
        durations = rng.uniform(0.05, 2.5, size=len(tests))
        for t, test in enumerate(tests):
            row_id += 1
            scale = ERROR_SCALE[test.rsplit("[", 1)[1].rstrip("]")]
            scale *= next((d.factor for d in drifts if d.test == t and j >= d.start), 1.0)
            failed = (t, j) in failing
            yield (row_id, j + 1, "correctness", test, "failed" if failed else "passed",
                   FAILURE_MESSAGE if failed else "", float(durations[t]),
                   0.0625 if failed else float(errors[t] * scale), float(errors[t] * scale * 4))


def failing_runs(failures: list[Failure]) -> set[int]:
    return {j for f in failures for j in range(f.start, f.end)}


def run_rows(plan: Plan, failed: set[int]) -> Iterator[tuple[Any, ...]]:
    for j, commit in enumerate(plan.commits):
        created, started, finished = _run_times(commit)
        gpu = plan.fleet[int(plan.run_device[j])]
        yield (j + 1, 1, j + 1, "push", None, None, int(plan.run_device[j]) + 1,
               "failed" if j in failed else "succeeded", f"{REPOSITORY}@{commit.sha}:{gpu.hostname}:push:0",
               "== correctness: tests failed\n" + FAILURE_MESSAGE if j in failed else "", "",
               created, started, finished)


def suite_rows(plan: Plan, failed: set[int], rng: np.random.Generator) -> Iterator[tuple[Any, ...]]:
    for j in range(len(plan.commits)):
        bad = j in failed
        yield (2 * j + 1, j + 1, "correctness", "correctness", "failed" if bad else "passed",
               "tests failed" if bad else "", 1 if bad else 0, float(rng.uniform(60, 90)),
               FAILURE_MESSAGE if bad else f"{len(correctness_tests(plan))} passed")
        yield (2 * j + 2, j + 1, "benchmarks", "benchmark", "passed", "", 0, float(rng.uniform(700, 900)),
               f"{len(plan.specs)} benchmarks")


# -- measurements ----------------------------------------------------------------------------


@dataclass
class Medians:
    """Every measurement's statistics, as (benchmarks, commits[, samples]) arrays."""

    samples: np.ndarray
    median: np.ndarray
    iqr: np.ndarray
    min: np.ndarray
    mean: np.ndarray
    cv: np.ndarray
    fraction: np.ndarray


def make_medians(plan: Plan, rng: np.random.Generator) -> Medians:
    true = plan.base_seconds[:, None] * plan.history.levels
    noise = np.exp(rng.normal(0.0, 1.0, size=true.shape + (SAMPLES,)) * plan.sigma[:, None, None])
    samples = true[:, :, None] * noise
    # A run now and then is slow throughout (a busy host, a throttled clock): the outliers
    # a change-point detector must not take for a step.
    slow = rng.random(true.shape) < 0.003
    samples[slow] *= rng.uniform(1.15, 1.8, size=(int(slow.sum()), 1))
    roofs = np.array([[roof_seconds(s, gpu) for gpu in plan.fleet] for s in plan.specs])  # (benchmarks, gpus)
    # Never faster than the roofline allows: ingest would reject such a measurement as a harness error.
    samples = np.maximum(samples, roofs.max(axis=1)[:, None, None] * 1.005)
    median = np.median(samples, axis=2)
    q25, q75 = np.percentile(samples, [25, 75], axis=2)
    mean = samples.mean(axis=2)
    return Medians(samples=samples, median=median, iqr=q75 - q25, min=samples.min(axis=2), mean=mean,
                   cv=samples.std(axis=2) / mean, fraction=roofs[:, plan.run_device] / median)


def _null(value: float | None) -> str:
    return "\\N" if value is None else repr(value)


def measurement_chunks(plan: Plan, m: Medians, progress: Progress, task: TaskID) -> Iterator[str]:
    """COPY text for every measurement, one run (commit) at a time: the order ingest writes them in.

    Formatted by hand rather than with ``write_row``: this is 2 M rows, and plain f-strings
    halve the seed time. Nothing here needs escaping (numbers and JSON arrays of numbers).
    """
    flops = [s.flops or None for s in plan.specs]  # no FLOPs (a copy): no achieved FLOP/s, as ingest does
    moved = [s.bytes for s in plan.specs]
    count = len(plan.specs)
    for j in range(len(plan.commits)):
        clock = 1980.0 if j % 37 else 1755.0  # a throttled run now and then
        lines = []
        for b, (samples, median, iqr, low, mean, cv, fraction) in enumerate(zip(
                m.samples[:, j, :].tolist(), m.median[:, j].tolist(), m.iqr[:, j].tolist(), m.min[:, j].tolist(),
                m.mean[:, j].tolist(), m.cv[:, j].tolist(), m.fraction[:, j].tolist())):
            work = flops[b]
            lines.append(f"{j * count + b + 1}\t{j + 1}\t{b + 1}\t[{','.join(map(repr, samples))}]\t{median!r}\t"
                         f"{iqr!r}\t{low!r}\t{mean!r}\t{SAMPLES}\t{cv!r}\t{clock!r}\t"
                         f"{_null(work / median if work else None)}\t{moved[b] / median!r}\t{fraction!r}\n")
        yield "".join(lines)
        progress.advance(task, count)


LATEST_COLUMNS = ("benchmark_id", "run_id", "median", "iqr", "n", "achieved_flops", "achieved_bandwidth",
                  "roofline_fraction")
MEASUREMENT_COLUMNS = ("id", "run_id", "benchmark_id", "samples", "median", "iqr", "min", "mean", "n", "cv",
                       "clock_mhz", "achieved_flops", "achieved_bandwidth", "roofline_fraction")


def copy_measurements(cursor: psycopg.Cursor[Any], plan: Plan, m: Medians, progress: Progress,
                      task: TaskID) -> int:
    statement = sql.SQL("COPY measurement ({}) FROM STDIN").format(
        sql.SQL(", ").join(map(sql.Identifier, MEASUREMENT_COLUMNS)))
    with cursor.copy(statement) as copy:
        for chunk in measurement_chunks(plan, m, progress, task):
            copy.write(chunk)
    return len(plan.specs) * len(plan.commits)


def latest_rows(plan: Plan, m: Medians) -> Iterator[tuple[Any, ...]]:
    """What ingest keeps in ``latestmeasurement``: every run is a push, so the last commit's row."""
    last = len(plan.commits) - 1
    for b, spec in enumerate(plan.specs):
        median = float(m.median[b, last])
        yield (b + 1, last + 1, median, float(m.iqr[b, last]), SAMPLES, spec.flops / median if spec.flops else None,
               spec.bytes / median, float(m.fraction[b, last]))


# -- changes ---------------------------------------------------------------------------------


def _triage(state: str, at: datetime, rng: np.random.Generator) -> list[dict[str, str]]:
    """The history ``roofwatch.service.records.triage.set_state`` would have left for a change now in ``state``."""
    if state == "new":
        return []
    path = ["acknowledged", "fixed"] if state == "fixed" else [state]
    history, previous = [], "new"
    for step, target in enumerate(path):
        when = at + timedelta(hours=float(rng.uniform(1, 48)) * (step + 1))
        history.append({"from": previous, "to": target, "note": TRIAGE_NOTES[target], "by": "ada",
                        "at": when.isoformat()})
        previous = target
    return history


def perf_change_rows(plan: Plan, rng: np.random.Generator) -> Iterator[dict[str, Any]]:
    """One change per step of at least 3 %; a tenth still wait for bisect to name the first bad commit."""
    states = list(TRIAGE_WEIGHTS)
    weights = np.array(list(TRIAGE_WEIGHTS.values()))
    for step in plan.history.steps:
        pct = step.change_pct
        if abs(pct) < 3.0:
            continue
        commit, previous = plan.commits[step.at], plan.commits[step.at - 1]
        state = str(rng.choice(states, p=weights))
        base = float(plan.base_seconds[step.bench])
        noise_pct = float(plan.sigma[step.bench] * 100)
        details: dict[str, Any] = {"before": base * step.before, "after": base * step.after,
                                   "threshold_pct": max(2.0, 3 * noise_pct), "noise_pct": noise_pct,
                                   "triage": _triage(state, commit.committed_at, rng)}
        first_bad: int | None = step.at + 1
        start_sha = previous.sha
        if rng.random() < 0.1 and step.at >= 4:
            first_bad, start_sha = None, plan.commits[step.at - 4].sha
            details["bisect_range"] = [c.sha for c in plan.commits[step.at - 3:step.at]]
            details["device_id"] = int(plan.run_device[step.at]) + 1
        half_width = abs(pct) * 0.2 + noise_pct
        yield dict(kind="perf-regression" if pct > 0 else "perf-improvement", benchmark_id=step.bench + 1,
                   suite="benchmarks", test_id=None, first_bad_commit_id=first_bad, range_start_sha=start_sha,
                   range_end_sha=commit.sha, change_pct=pct, ci_low=pct - half_width, ci_high=pct + half_width,
                   p_value=float(10 ** rng.uniform(-6, -2)), state=state, detected_run_id=step.at + 1,
                   details=details, created_at=_run_times(commit)[2])


def correctness_change_rows(plan: Plan, failures: list[Failure], drifts: list[Drift],
                            rng: np.random.Generator) -> Iterator[dict[str, Any]]:
    tests = correctness_tests(plan)
    for f in failures:
        commit = plan.commits[f.start]
        fixed = f.end < len(plan.commits)
        details: dict[str, Any] = {"message": FAILURE_MESSAGE}
        if fixed:
            details.update(fixed_in_run=f.end + 1, fixed_at=plan.commits[f.end].sha)
        yield dict(kind="correctness-failure", benchmark_id=None, suite="correctness", test_id=tests[f.test],
                   first_bad_commit_id=f.start + 1, range_start_sha=plan.commits[f.start - 1].sha,
                   range_end_sha=commit.sha, change_pct=None, ci_low=None, ci_high=None, p_value=None,
                   state="fixed" if fixed else "new", detected_run_id=f.start + 1, details=details,
                   created_at=_run_times(commit)[2])
    for d in drifts:
        commit = plan.commits[d.start]
        before = ERROR_SCALE[tests[d.test].rsplit("[", 1)[1].rstrip("]")]
        state = "acknowledged" if rng.random() < 0.5 else "expected"
        yield dict(kind="numerics-drift", benchmark_id=None, suite="correctness", test_id=tests[d.test],
                   first_bad_commit_id=d.start + 1, range_start_sha=plan.commits[d.start - 1].sha,
                   range_end_sha=commit.sha, change_pct=None, ci_low=None, ci_high=None, p_value=None, state=state,
                   detected_run_id=d.start + 1,
                   details={"metric": "max_abs_err", "before": before, "after": before * d.factor,
                            "triage": _triage(state, commit.committed_at, rng)},
                   created_at=_run_times(commit)[2])


CHANGE_COLUMNS = ("id", "repository_id", "benchmark_id", "suite", "test_id", "kind", "first_bad_commit_id",
                  "range_start_sha", "range_end_sha", "change_pct", "ci_low", "ci_high", "p_value", "state",
                  "detected_run_id", "details", "created_at")


def change_rows(changes: Iterable[dict[str, Any]]) -> Iterator[tuple[Any, ...]]:
    """In the order analysis would have stored them: by when they were seen."""
    for i, c in enumerate(sorted(changes, key=lambda c: c["created_at"])):
        yield (i + 1, 1, *(json.dumps(c[k]) if k == "details" else c[k] for k in CHANGE_COLUMNS[2:]))


# -- comparisons -----------------------------------------------------------------------------


def comparison_heads(plan: Plan, rng: np.random.Generator) -> list[int]:
    """Half at op-wide rewrites (verdict: regression or improvement), half at ordinary commits."""
    count = max(2, min(6, len(plan.commits) // 300))
    events = [e for e in plan.history.event_commits if e >= 1]
    heads = events[: count // 2]
    while len(heads) < count:
        heads.append(int(rng.integers(1, len(plan.commits))))
    return heads


def _direction(pct: float, low: float, high: float, threshold: float) -> str:
    if pct > threshold and low > 0:
        return "regression"
    if pct < -threshold and high < 0:
        return "improvement"
    return "no-change"


def comparison_result_rows(plan: Plan, k: int, head: int, gpu: int, first_id: int,
                           rng: np.random.Generator) -> tuple[list[tuple[Any, ...]], str]:
    """Per-benchmark rows of one A/B of commit ``head`` against its parent, and the overall verdict."""
    rows = []
    for b, spec in enumerate(plan.specs):
        true = plan.base_seconds[b] * plan.history.levels[b, [head - 1, head]]
        sigma = float(plan.sigma[b])
        values = true[:, None] * np.exp(rng.normal(0.0, sigma, size=(2, ROUNDS)))
        base_median, head_median = (float(v) for v in np.median(values, axis=1))
        pct = (head_median / base_median - 1.0) * 100
        noise_pct, half = sigma * 100, 2.5 * sigma * 100 / np.sqrt(ROUNDS)
        threshold = max(2.0, 3 * noise_pct)
        direction = _direction(pct, pct - half, pct + half, threshold)
        p_value = float(10 ** rng.uniform(-7, -3)) if direction != "no-change" else float(rng.uniform(0.05, 1))
        roof = roof_seconds(spec, plan.fleet[gpu])
        rows.append((first_id + b, k, b + 1, json.dumps(values[0].tolist()), json.dumps(values[1].tolist()),
                     base_median, head_median, pct, pct - half, pct + half, p_value, min(1.0, p_value * 10),
                     noise_pct, threshold, 2.5 * noise_pct, direction,
                     "" if direction != "no-change" else "within the noise", roof / base_median, roof / head_median))
    directions = {r[15] for r in rows}
    verdict = next((v for v in ("regression", "improvement") if v in directions), "no-change")
    return rows, verdict


# -- orchestration ---------------------------------------------------------------------------

TABLE_COLUMNS = {
    "repository": ("id", "full_name", "clone_url", "default_branch", "trust_policy", "installation_id",
                   "created_at"),
    "commit": ("id", "repository_id", "sha", "parents", "author", "message", "committed_at", "position"),
    "device": ("id", "fingerprint", "device_class", "uuid", "driver", "cuda", "torch_version", "triton_version",
               "peak_bandwidth", "peak_flops", "peaks_source", "sm_clock_mhz", "power_limit_w", "l2_bytes",
               "hostname", "created_at"),
    "run": ("id", "repository_id", "commit_id", "trigger", "pr_number", "base_sha", "device_id", "state",
            "idempotency_key", "log_excerpt", "error", "created_at", "started_at", "finished_at"),
    "suiteexecution": ("id", "run_id", "name", "kind", "status", "reason", "exit_code", "duration_s",
                       "output_tail"),
    "benchmark": ("id", "fingerprint", "repository_id", "suite", "name", "params", "dtype", "shape", "impl",
                  "device_class", "unit", "higher_is_better", "flops", "bytes"),
    "testoutcome": ("id", "run_id", "suite", "test_id", "outcome", "message", "duration_s", "max_abs_err",
                    "max_rel_err"),
    "change": CHANGE_COLUMNS,
    "comparison": ("id", "repository_id", "base_commit_id", "head_commit_id", "device_id", "purpose", "run_id",
                   "state", "verdict", "rounds", "idempotency_key", "error", "details", "created_at",
                   "finished_at"),
    "comparisonresult": ("id", "comparison_id", "benchmark_id", "base_values", "head_values", "base_median",
                         "head_median", "change_pct", "ci_low", "ci_high", "p_value", "q_value", "noise_pct",
                         "threshold_pct", "mde_pct", "direction", "reason", "base_roofline", "head_roofline"),
}


def comparison_rows(plan: Plan, rng: np.random.Generator) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    comparisons: list[tuple[Any, ...]] = []
    results: list[tuple[Any, ...]] = []
    for k, head in enumerate(comparison_heads(plan, rng), start=1):
        gpu = int(plan.run_device[head])
        rows, verdict = comparison_result_rows(plan, k, head, gpu, len(results) + 1, rng)
        results.extend(rows)
        purpose = "pull_request" if k % 2 else "confirm"
        base_sha, head_sha = plan.commits[head - 1].sha, plan.commits[head].sha
        finished = _run_times(plan.commits[head])[2] + timedelta(minutes=40)
        details: dict[str, Any] = {"mde_pct": float(np.median([r[14] for r in rows])), "new_failures": [],
                                   "fixed": []}
        if purpose == "confirm":
            details.update(applied=True, changes=[])
        comparisons.append((k, 1, head, head + 1, gpu + 1, purpose, None, "succeeded", verdict, ROUNDS,
                            f"{REPOSITORY}:{purpose}:{base_sha}..{head_sha}:{k}", "", json.dumps(details),
                            finished - timedelta(minutes=35), finished))
    return comparisons, results


@dataclass(frozen=True)
class SeedReport:
    rows: dict[str, int]
    seconds: float
    phases: dict[str, float]  # seconds spent generating, formatting + copying, analysing

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def _ensure_empty(cursor: psycopg.Cursor[Any], reset: bool) -> None:
    tables = [t.name for t in SQLModel.metadata.sorted_tables]
    if reset:
        cursor.execute(sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(
            sql.SQL(", ").join(map(sql.Identifier, tables))))
        return
    cursor.execute("SELECT EXISTS (SELECT 1 FROM repository)")
    row = cursor.fetchone()
    if row and row[0]:
        raise SystemExit("the database already holds data; seed an empty one, or pass --reset to empty it")


def _reset_sequences(cursor: psycopg.Cursor[Any]) -> None:
    """COPY wrote explicit ids; the next ORM insert must not collide with them."""
    for table in SQLModel.metadata.sorted_tables:
        if "id" not in table.c:  # keyed by another table's id (latestmeasurement)
            continue
        cursor.execute(sql.SQL("SELECT setval(pg_get_serial_sequence(%s, 'id'), "
                               "COALESCE((SELECT MAX(id) FROM {}), 0) + 1, false)").format(sql.Identifier(table.name)),
                       (f'"{table.name}"',))


def seed(database_url: str, benchmarks: int, commits: int, seed_value: int = 0, devices: int = 2,
         reset: bool = False, console: Console | None = None) -> SeedReport:
    """Migrate the database at ``database_url`` and fill it; the rows written per table."""
    console = console or Console()
    started = time.perf_counter()
    migrate(sqlalchemy_url(database_url))
    with psycopg.connect(libpq_url(database_url)) as connection, connection.cursor() as cursor:
        _ensure_empty(cursor, reset)  # before minutes of work, not after
    plan = make_plan(benchmarks, commits, seed_value, devices)
    rng = np.random.default_rng(seed_value + 1)
    medians = make_medians(plan, rng)
    failures, drifts = correctness_events(plan, rng)
    failed = failing_runs(failures)
    changes = [*perf_change_rows(plan, rng), *correctness_change_rows(plan, failures, drifts, rng)]
    comparisons, results = comparison_rows(plan, rng)
    phases = {"migrate + generate": time.perf_counter() - started}
    sources: dict[str, Iterable[Sequence[Any]]] = {
        "repository": repository_rows(plan), "commit": commit_rows(plan), "device": device_rows(plan),
        "run": run_rows(plan, failed), "suiteexecution": suite_rows(plan, failed, rng),
        "benchmark": benchmark_rows(plan), "testoutcome": outcome_rows(plan, failures, drifts, rng),
        "change": change_rows(changes), "comparison": comparisons, "comparisonresult": results,
    }
    rows: dict[str, int] = {}
    columns = (TextColumn("{task.description:<16}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with psycopg.connect(libpq_url(database_url)) as connection, connection.cursor() as cursor, \
            Progress(*columns, console=console, transient=not console.is_terminal) as progress:
        for table, source in sources.items():
            rows[table] = copy_rows(cursor, table, TABLE_COLUMNS[table], source,
                                    progress, progress.add_task(table, total=None))
            if table == "benchmark":  # measurements need runs and benchmarks in place (foreign keys)
                task = progress.add_task("measurement", total=benchmarks * commits)
                rows["measurement"] = copy_measurements(cursor, plan, medians, progress, task)
                rows["latestmeasurement"] = copy_rows(
                    cursor, "latestmeasurement", LATEST_COLUMNS, latest_rows(plan, medians),
                    progress, progress.add_task("latestmeasurement", total=benchmarks))
        _reset_sequences(cursor)
    phases["copy"] = time.perf_counter() - started - sum(phases.values())
    with psycopg.connect(libpq_url(database_url), autocommit=True) as connection:
        # Fresh statistics: without them the planner guesses table sizes, and the timings would
        # measure the guess rather than the queries. Production gets these from autovacuum.
        connection.execute("VACUUM (ANALYZE)")
    phases["vacuum analyze"] = time.perf_counter() - started - sum(phases.values())
    return SeedReport(rows=rows, seconds=time.perf_counter() - started, phases=phases)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True, help="PostgreSQL URL (postgresql://…)")
    parser.add_argument("--benchmarks", type=int, default=1000, help="series (at most 1,080)")
    parser.add_argument("--commits", type=int, default=2000, help="commits on main, one run each (at least 10)")
    parser.add_argument("--seed", type=int, default=0, help="random seed: the same seed gives the same rows")
    parser.add_argument("--devices", type=int, choices=(1, 2), default=2, help="GPUs of one class that share the runs")
    parser.add_argument("--reset", action="store_true", help="empty every table first")
    args = parser.parse_args(argv)
    if args.commits < 10 or args.benchmarks < 1:
        parser.error("need at least 10 commits and 1 benchmark")
    console = Console()
    report = seed(args.database_url, args.benchmarks, args.commits, args.seed, args.devices, args.reset, console)
    for table, count in report.rows.items():
        console.print(f"  {table:<16} {count:>10,}")
    console.print("  " + ", ".join(f"{phase} {seconds:.1f} s" for phase, seconds in report.phases.items()))
    console.print(f"seeded {report.total:,} rows in {report.seconds:.1f} s "
                  f"({report.total / report.seconds:,.0f} rows/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
