"""``bench.gpu_ab_check``: its statistics, table-driven, and its whole control flow on a modelled device."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from bench.gpu_ab_check import (
    FAMILIES,
    Workload,
    _profiled_kernels,
    correlation,
    grown,
    select_families,
    spread,
    summary,
    timer_options,
)
from roofwatch.timing import Telemetry

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("base", "planted", "grain", "expected"), [
    (4096, 0.02, 1, 4178),  # 4177.92 up: never less than the nominal amount
    (4096, 0.02, 16, 4192),
    (8192, 0.02, 16, 8368),
    (4096, 0.10, 16, 4512),
    (100, 0.02, 1, 102),
    (100, 0.05, 1, 105),
    (64 << 20, 0.02, 16, 68451056),
    (4096, 0.0, 16, 4096),
])
def test_grown_is_at_least_the_nominal_amount_on_the_grain(base: int, planted: float, grain: int,
                                                           expected: int) -> None:
    size = grown(base, planted, grain)
    assert size == expected
    assert size % grain == 0 and size / base - 1 >= planted - 1e-12


def test_every_workload_of_every_family_is_planted_at_least_nominally() -> None:
    for family in FAMILIES:
        for planted in (0.02, 0.05, 0.10):
            workload = Workload(family, planted)
            assert planted <= workload.exact_planted < planted + 0.006, (workload.label, workload.exact_planted)


@pytest.mark.parametrize(("values", "expected"), [
    ([1.0, 1.01, 1.005], 0.01),
    ([2.0], 0.0),
    ([], math.nan),
    ([1.0, None], math.nan),
    ([1.0, 0.0], math.nan),
])
def test_spread(values: list[float | None], expected: float) -> None:
    found = spread(values)
    assert (math.isnan(found) and math.isnan(expected)) or found == pytest.approx(expected)


@pytest.mark.parametrize(("xs", "ys", "expected"), [
    ([1.0, 2.0, 3.0], [2.0, 4.0, 6.0], 1.0),
    ([1.0, 2.0, 3.0], [3.0, 2.0, 1.0], -1.0),
    ([1.0, 2.0], [1.0, 2.0], math.nan),  # too few pairs
    ([1.0, 1.0, 1.0], [1.0, 2.0, 3.0], math.nan),  # no variation
    ([1.0, 2.0, None], [1.0, 2.0, 3.0], math.nan),
])
def test_correlation(xs: list[float | None], ys: list[float | None], expected: float) -> None:
    found = correlation(xs, ys)
    assert (math.isnan(found) and math.isnan(expected)) or found == pytest.approx(expected)


def test_summary_normalizes_to_the_reference_clock_only_with_every_reading() -> None:
    samples = [2.0e-4] * 10 + [2.2e-4] * 10
    clocks = [Telemetry(sm_clock_mhz=1800.0)] * 20
    found = summary(samples, "cuda_event", clocks, reference_mhz=1980.0)
    assert found["value"] == pytest.approx(2.0e-4)  # the fast mode: the 10th percentile
    assert found["value_at_ref"] == pytest.approx(2.0e-4 * 1800 / 1980)
    assert found["sm_clock_mhz"] == 1800.0 and found["throttled_share"] == 0.0
    missing = summary(samples, "cuda_event", [Telemetry()] * 20, reference_mhz=1980.0)
    assert missing["value_at_ref"] is None and missing["sm_clock_mhz"] is None


def test_timer_variants_change_one_thing_each() -> None:
    assert timer_options("harness").keys() == {"rule", "warmup"}
    assert timer_options("no hold")["hold_stream"] is False
    assert timer_options("hold x10")["hold_margin"] == 20.0
    assert timer_options("graph x10")["graphs"].max_calls == 10
    assert timer_options("no flush")["flush_l2"] is False
    with pytest.raises(ValueError, match="unknown timer variant"):
        timer_options("faster")


def test_workloads_are_selected_by_words_of_their_names() -> None:
    assert [f.name for f in select_families("matmul bf16 4096,1 GiB")] == ["copy 1 GiB", "matmul bf16 4096"]
    assert len(select_families("all")) == len(FAMILIES)
    with pytest.raises(SystemExit, match="no workload matches"):
        select_families("conv2d")


def test_cupti_times_are_per_kernel_so_a_memset_does_not_halve_the_gemm() -> None:
    # Each call ran a 1 µs Memset and a 172 µs GEMM: one median over the 40 entries would be 86.
    found = {"kernels": {"Memset (Device)": 20, "nvjet_gemm": 20},
             "durations_by_kernel_us": {"Memset (Device)": [1.0] * 20, "nvjet_gemm": [172.0] * 20}}
    assert _profiled_kernels(found) == "nvjet_gemm median 172.0 µs, p90 172.0 µs, + Memset (Device) 1.0 µs"
    # Raw files written before durations were kept per kernel say what their one median covers.
    older = {"kernels": {"Memset (Device)": 20, "nvjet_gemm": 20}, "durations_us": [1.0, 172.0] * 20}
    assert _profiled_kernels(older) == "all 40 kernel entries (2 kernels a call) median 86.5 µs, p90 172.0 µs"
    assert _profiled_kernels({"error": "profiler unavailable"}) == ""


def _tables(markdown: str) -> list[list[str]]:
    tables, current = [], []
    for line in markdown.splitlines() + [""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables


def test_the_check_runs_its_whole_control_flow_on_a_modelled_device(tmp_path: Path) -> None:
    markdown, report = tmp_path / "gpu-ab-check.md", tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "bench.gpu_ab_check", "--fake", "--rounds", "4",
                           "--workloads", "copy 256 MiB,matmul bf16 4096,rmsnorm fwd 8192x8192",
                           "--experiments", "gemm,flush", "--env", "CUBLAS_WORKSPACE_CONFIG=:4096:8",
                           "--markdown", str(markdown), "--json", str(report), "--out-dir", str(tmp_path / "raw")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    text, data = markdown.read_text(), json.loads(report.read_text())
    # 12 A/A comparisons, none called a change on any statistic.
    assert "| **false changes** |  | 0 of 12 | 0 of 12 | 0 of 12 |" in text
    # The modelled card runs compute work at a per-process clock: the matmul's wall-time A/A
    # cannot be settled at ±2 %, its clock-normalized one says "no change", and the spread
    # table names the clock (r = 1 between the statistic and the clock's period).
    matmul = next(row for row in data["aa"] if row["workload"] == "matmul bf16 4096")
    assert matmul["gpu"]["direction"] == "inconclusive" and matmul["clock_normalized"]["direction"] == "none"
    matmul_spread = next(row for row in data["spreads"] if row["label"] == "matmul bf16 4096")
    assert matmul_spread["statistic"] > 0.02 and matmul_spread["at_reference"] < 0.01
    assert matmul_spread["clock_r"] > 0.95
    ladder = {(row["workload"], row["planted"]): row for row in data["ladder"]}
    assert ladder[("matmul bf16 4096", 0.1)]["clock_normalized"]["direction"] == "regression"
    assert ladder[("copy 256 MiB", 0.1)]["gpu"]["direction"] == "regression"
    assert "matmul bf16 4096 | graph x10" in text and "rmsnorm fwd 8192x8192 | harness without the stream hold" in text
    assert "8 × Memset (Device) + modelled_matmul" in text and data["env"] == [["CUBLAS_WORKSPACE_CONFIG", ":4096:8"]]
    # The GEMM's CUPTI time is its own kernel's, not a median between it and the Memset.
    assert "| matmul bf16 4096 | modelled_matmul median " in text and ", + Memset (Device) 1.0 µs; events" in text
    # Every table renders: a header with as many cells as its delimiter row and its rows
    # (a "workload | variant" heading in one cell once made the timer-variant table 9 wide on 8).
    for table in _tables(text):
        widths = {len(line.strip()[1:-1].split("|")) for line in [table[0], *table[2:]]}
        assert widths == {table[1].count("---")}, table[:3]
    assert len(list((tmp_path / "raw").glob("process-*.json"))) == 8
