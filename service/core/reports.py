"""The comparison report: what ``roofwatch compare --format json`` prints, what the PR comment, the
terminal table and the dashboard's compare page are rendered from — one typed shape for all of them.

``records.comparisons.comparison_report`` fills it from the database, ``roofwatch verdict`` from
result files (a subset: no database ids, no device); renderers read it and nothing else.
"""

from __future__ import annotations

from typing import Any, TypedDict


class BenchmarkVerdictRow(TypedDict, total=False):
    """One benchmark's A/B verdict. Times in the benchmark's ``unit`` (seconds for pytest-benchmark)."""

    benchmark: str
    suite: str
    unit: str
    higher_is_better: bool
    base_median: float | None
    head_median: float | None
    change_pct: float  # the paired change of the median time, %; + is slower
    ci_low: float
    ci_high: float
    confidence: float
    p_value: float
    q_value: float
    noise_pct: float
    threshold_pct: float | None  # the change that counts (min_effect, or the noise when larger)
    mde_pct: float | None  # the smallest change this run could detect on it, at 80 % power
    direction: str  # regression | improvement | none | inconclusive
    reason: str
    rounds: int
    rounds_needed: int | None
    base_roofline: float | None
    head_roofline: float | None


class ComparisonReport(TypedDict, total=False):
    id: int | None
    base: str | None
    head: str | None
    state: str
    verdict: str
    rounds: int
    purpose: str
    device: str | None
    error: str
    mde_pct: float | None  # the largest of the benchmarks': what the whole run could detect
    mde_benchmark: str | None  # the benchmark that sets it
    min_effect_pct: float | None
    new_failures: list[dict[str, Any]]
    fixed: list[Any]
    benchmarks: list[BenchmarkVerdictRow]
    compiled: dict[str, Any]
    suites_source: str
    budget_s: float | None
    spent_s: float | None
    stop_reason: str
