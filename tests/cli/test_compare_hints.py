"""What `roofwatch compare` says under an inconclusive benchmark: how many rounds would settle it, or the
min_effect that would, and where the docs explain it."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from roofwatch.service.cli.compare import INCONCLUSIVE_DOCS, render, settle_hint
from roofwatch.service.core.reports import BenchmarkVerdictRow, ComparisonReport

ROOT = Path(__file__).resolve().parents[2]


def row(direction: str = "inconclusive", change: float = 0.0, noise: float | None = 5.0, rounds: int = 3,
        suite: str = "benchmarks", threshold: float = 2.0, unit: str = "s") -> BenchmarkVerdictRow:
    return {"benchmark": "test_k", "suite": suite, "unit": unit, "base_median": 1e-3, "head_median": 1e-3,
            "change_pct": change, "ci_low": -20.0, "ci_high": 20.0, "noise_pct": noise, "threshold_pct": threshold,
            "mde_pct": 30.0, "direction": direction, "reason": "the interval reaches beyond ±2%", "rounds": rounds}


@pytest.mark.parametrize(("shown", "cap", "said"), [
    # ±5 % per process: about 85 rounds narrow the interval inside ±2 %, and the option that asks for them
    (row(noise=5.0), 10, "more rounds would help: about 85 would settle it at this noise (--max-rounds 85)"),
    # ±60 %: no number of rounds would at ±2 %; the min_effect the cap's rounds would settle
    (row(noise=60.0), 10, "cannot be settled at ±2 %: its noise is ±60.0 % per process; a min_effect of 98 % "
                          "would settle it within 10 rounds ([tool.roofwatch] min_effect)"),
    (row(noise=60.0, rounds=16), 16, "a min_effect of 64 % would settle it within 16 rounds"),
    # a peak-memory benchmark has its own setting
    (row(noise=60.0, suite="benchmarks:memory", unit="B"), 10, "a memory_min_effect of 98 %"),
    # too few rounds for any noise: nothing to project from
    (row(noise=None, rounds=2), 10, ""),
])
def test_an_inconclusive_benchmark_says_what_would_settle_it(shown: BenchmarkVerdictRow, cap: int, said: str) -> None:
    hint = settle_hint(shown, cap)
    assert (said in hint) if said else hint == "", hint


def report(rows: list[BenchmarkVerdictRow], max_rounds: int | None = 10) -> ComparisonReport:
    return {"id": None, "verdict": "inconclusive", "rounds": 3, "benchmarks": rows, "new_failures": [],
            "error": "", "mde_pct": 30.0, "stop_reason": "cannot settle", "max_rounds": max_rounds}


def test_the_terminal_shows_the_hint_and_the_docs_for_inconclusive_ones_only() -> None:
    console = Console(record=True, width=400)
    render(console, report([row(noise=5.0), {**row(direction="none"), "benchmark": "test_quiet"}]))
    out = console.export_text()
    assert "inconclusive test_k:" in out and "--max-rounds 85" in out
    assert out.count("would settle it") == 1  # nothing under the decided one
    assert INCONCLUSIVE_DOCS in out

    console = Console(record=True, width=400)
    render(console, report([row(direction="none")]))
    assert INCONCLUSIVE_DOCS not in console.export_text()


def test_a_memory_row_prints_its_sizes_in_bytes() -> None:
    console = Console(record=True, width=400)
    memory = {**row(direction="regression", suite="benchmarks:memory", unit="B"),
              "base_median": 4 * 2**20, "head_median": 8 * 2**20}
    render(console, report([memory]))
    out = console.export_text()
    assert "4.00 MiB" in out and "8.00 MiB" in out and "test_k (peak memory)" in out


def test_the_docs_the_terminal_points_to_exist() -> None:
    from tests.project.test_docs_links import HEADING, prose_lines, slug

    page, anchor = INCONCLUSIVE_DOCS.split("#")
    headings = {slug(m.group(2)) for _, line in prose_lines((ROOT / page).read_text())
                if (m := HEADING.match(line))}
    assert anchor in headings, sorted(headings)


@pytest.mark.parametrize(("state", "verdict", "said"), [
    ("failed", "no-change", "verdict: incomplete (the suites that finished: no-change)"),
    ("failed", "inconclusive", "verdict: incomplete (the suites that finished: inconclusive)"),
    ("failed", "regression", "verdict: regression"),  # a proven slowdown is named as such
    ("succeeded", "no-change", "verdict: no-change"),
])
def test_a_suite_that_did_not_finish_makes_the_last_line_incomplete(state: str, verdict: str, said: str) -> None:
    console = Console(record=True, width=400)
    render(console, {**report([row(direction="none")]), "state": state, "verdict": verdict})  # type: ignore[typeddict-item]
    assert said + " after 3 round(s)" in console.export_text()
