"""One benchmark's A/B verdict as every report shows it, and which verdicts a missing benchmark overrides.

Beside the report's shapes (``core/reports.py``), standing on the A/B floor's verdict alone: a
stored comparison's report (``records.comparisons.comparison_report``) and a verdict from result
files (``roofwatch verdict``, which reads no database) make their rows and their overall verdict
the one same way.
"""

from __future__ import annotations

import math
from typing import Any

from roofwatch.ab import abtest
from roofwatch.service.core.reports import BenchmarkVerdictRow

# The overall verdicts a benchmark of the base missing on the head overrides (to "missing", never
# green); a correctness failure or a proven regression decides whatever is missing.
GATED = ("no-change", "improvement", "inconclusive")


def verdict_row(verdict: abtest.ABVerdict, *, name: str, suite: str, unit: str = "s", higher_is_better: bool = False,
                base_median: float | None, head_median: float | None, rounds: int,
                rooflines: tuple[float | None, float | None] | None = None, head_benchmark: str | None = None,
                attribution: dict[str, Any] | None = None) -> BenchmarkVerdictRow:
    """One benchmark's verdict as every report shows it: the one way a stored comparison's row
    (``comparison_report``) and a verdict from result files (``roofwatch verdict``) are made.

    A threshold or detectable change that no round count gave (infinite) is ``None``: JSON has no
    infinity. ``rounds_needed`` is there only where the verdict said it (a fresh one, not a stored row).
    """
    row: BenchmarkVerdictRow = {
        "benchmark": name, "suite": suite, "unit": unit, "higher_is_better": higher_is_better,
        "base_median": base_median, "head_median": head_median,
        "change_pct": verdict.change_pct, "ci_low": verdict.ci_low, "ci_high": verdict.ci_high,
        "p_value": verdict.p_value, "q_value": verdict.q_value, "noise_pct": verdict.noise_pct,
        "threshold_pct": _finite(verdict.threshold_pct), "mde_pct": _finite(verdict.mde_pct),
        "direction": verdict.direction, "reason": verdict.reason, "rounds": rounds,
        "confidence": verdict.confidence,
    }
    if verdict.rounds_needed is not None:
        row["rounds_needed"] = verdict.rounds_needed
    if rooflines is not None:
        row["base_roofline"], row["head_roofline"] = rooflines
    if head_benchmark is not None:
        row["head_benchmark"] = head_benchmark
    return {**row, **_why(attribution)}


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _why(attribution: dict[str, Any] | None) -> BenchmarkVerdictRow:
    """A row's ``why``, ``cause`` and ``attribution`` fields (none when nothing was recorded)."""
    if not attribution:
        return {}
    return {"why": attribution.get("why", ""), "cause": attribution.get("cause", "unknown"),
            "attribution": {k: v for k, v in attribution.items() if k not in ("why", "cause")}}
