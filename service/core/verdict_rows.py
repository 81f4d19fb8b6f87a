"""One benchmark's A/B verdict as every report shows it, and which verdicts a missing benchmark overrides.

Beside the report's shapes (``core/reports.py``), standing on the A/B floor's verdict alone: a
stored comparison's report (``records.comparisons.comparison_report``) and a verdict from result
files (``roofwatch verdict``, which reads no database) make their rows and their overall verdict
the one same way.
"""

from __future__ import annotations

import math
from dataclasses import asdict, fields
from typing import Any, cast

from roofwatch.ab import abtest
from roofwatch.service.core.reports import BenchmarkVerdictRow

# The overall verdicts a benchmark of the base missing on the head overrides (to "missing", never
# green); a correctness failure or a proven regression decides whatever is missing.
GATED = ("no-change", "improvement", "inconclusive")

# ``abtest.ABVerdict`` is the one A/B result type: its comparison row (``models.ComparisonResult``),
# its report row (``BenchmarkVerdictRow``) and its public model carry its fields by name, and are
# made from it and back by the functions below, so a new statistic is a field of the verdict and
# a field of each shape (``tests/core/test_verdict_shapes.py`` names the shape that lacks it).
# What a row does not store: its rounds are its values, the level of its interval is the
# comparison's (adjusted where it is read), and the rounds that would settle it are said only fresh.
NOT_STORED = ("rounds", "confidence", "rounds_needed")
# Statistics that no round count gave when infinite: None in the table and in JSON, which has no infinity.
UNBOUNDED = ("threshold_pct", "mde_pct")
STORED = tuple(f.name for f in fields(abtest.ABVerdict) if f.name not in NOT_STORED)


def stored_fields(verdict: abtest.ABVerdict) -> dict[str, Any]:
    """The verdict's comparison-row columns, by name."""
    return _fields(verdict, NOT_STORED)


def stored_verdict(row: Any, rounds: int) -> abtest.ABVerdict:
    """A stored row (anything with the ``STORED`` attributes) as the verdict it was stored from."""
    values = {name: getattr(row, name) for name in STORED}
    for name in UNBOUNDED:
        if values[name] is None:
            values[name] = float("inf")
    return abtest.ABVerdict(rounds=rounds, **values)


def verdict_row(verdict: abtest.ABVerdict, *, name: str, suite: str, unit: str = "s", higher_is_better: bool = False,
                base_median: float | None, head_median: float | None, rounds: int,
                rooflines: tuple[float | None, float | None] | None = None, head_benchmark: str | None = None,
                attribution: dict[str, Any] | None = None) -> BenchmarkVerdictRow:
    """One benchmark's verdict as every report shows it: the one way a stored comparison's row
    (``comparison_report``) and a verdict from result files (``roofwatch verdict``) are made.

    A threshold or detectable change that no round count gave (infinite) is ``None``: JSON has no
    infinity. ``rounds_needed`` is there only where the verdict said it (a fresh one, not a stored row).
    """
    statistics = _fields(verdict, ("rounds", "rounds_needed"))
    row = cast(BenchmarkVerdictRow, {
        "benchmark": name, "suite": suite, "unit": unit, "higher_is_better": higher_is_better,
        "base_median": base_median, "head_median": head_median, **statistics, "rounds": rounds,
    })
    if verdict.rounds_needed is not None:
        row["rounds_needed"] = verdict.rounds_needed
    if rooflines is not None:
        row["base_roofline"], row["head_roofline"] = rooflines
    if head_benchmark is not None:
        row["head_benchmark"] = head_benchmark
    return {**row, **_why(attribution)}


def _fields(verdict: abtest.ABVerdict, left_out: tuple[str, ...]) -> dict[str, Any]:
    """The verdict's fields by name, less ``left_out``; an unbounded one that is infinite is None."""
    return {name: _finite(value) if name in UNBOUNDED else value
            for name, value in asdict(verdict).items() if name not in left_out}


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _why(attribution: dict[str, Any] | None) -> BenchmarkVerdictRow:
    """A row's ``why``, ``cause`` and ``attribution`` fields (none when nothing was recorded)."""
    if not attribution:
        return {}
    return {"why": attribution.get("why", ""), "cause": attribution.get("cause", "unknown"),
            "attribution": {k: v for k, v in attribution.items() if k not in ("why", "cause")}}
