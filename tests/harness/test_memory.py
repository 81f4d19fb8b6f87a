"""Peak memory per benchmark: what one call allocates at its peak, above what was live when it began."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from roofwatch import memory
from roofwatch.common.envelope import SuiteResult
from roofwatch.result_files.suite_results import parse_benchmark_json
from roofwatch.workers.memory_suites import with_memory_suites

MIB = 2**20


def test_a_traced_call_counts_what_it_allocates_and_not_its_inputs() -> None:
    inputs = np.ones(4 * MIB // 8)  # live before the call: not the call's memory

    def kernel(scratch_bytes: int) -> float:
        scratch = np.empty(scratch_bytes // 8)
        scratch[:] = inputs[0]
        return float(scratch[0])

    one = memory.traced_peak(lambda: kernel(MIB))
    two = memory.traced_peak(lambda: kernel(2 * MIB))
    assert one.source == two.source == "tracemalloc"
    assert MIB <= one.bytes < MIB + 64 * 1024, one  # the buffer and a little interpreter bookkeeping
    assert 2 * MIB <= two.bytes < 2 * MIB + 64 * 1024, two


def test_a_trace_already_running_is_reset_for_the_call_and_left_running() -> None:
    import tracemalloc

    tracemalloc.start()
    try:
        held = np.empty(8 * MIB // 8)  # traced, live, and the trace's peak so far
        peak = memory.traced_peak(lambda: np.empty(MIB // 8))
        assert tracemalloc.is_tracing()
        assert MIB <= peak.bytes < 2 * MIB, peak
        del held
    finally:
        tracemalloc.stop()


class FakeCuda:
    """torch.cuda's allocator counters for a device whose calls allocate through ``allocate``/``free``."""

    def __init__(self, live: int) -> None:
        self.allocated = self.peak = live
        self.synchronized = 0

    def allocate(self, n: int) -> None:
        self.allocated += n
        self.peak = max(self.peak, self.allocated)

    def free(self, n: int) -> None:
        self.allocated -= n

    def synchronize(self, device: object = None) -> None:
        self.synchronized += 1

    def memory_allocated(self, device: object = None) -> int:
        return self.allocated

    def reset_peak_memory_stats(self, device: object = None) -> None:
        self.peak = self.allocated

    def max_memory_allocated(self, device: object = None) -> int:
        return self.peak


class FakeTorch:
    def __init__(self, live: int) -> None:
        self.cuda = FakeCuda(live)


def test_on_cuda_the_peak_is_torchs_above_what_was_allocated_when_the_call_began() -> None:
    torch = FakeTorch(live=100 * MIB)  # inputs and the timer's flush buffer
    torch.cuda.allocate(300 * MIB)  # an earlier peak, long gone, must not count
    torch.cuda.free(300 * MIB)

    def kernel() -> None:
        torch.cuda.allocate(8 * MIB)  # a temporary
        torch.cuda.allocate(4 * MIB)  # the output
        torch.cuda.free(8 * MIB)

    peak = memory.cuda_peak(kernel, torch)
    assert peak == memory.PeakMemory(12 * MIB, "cuda")
    assert torch.cuda.synchronized == 2  # before (what is live is settled) and after the call


def test_the_timer_names_the_allocator() -> None:
    assert memory.peak_memory(lambda: np.empty(MIB // 8), "host").source == "tracemalloc"
    assert memory.extra_info_for(memory.PeakMemory(512, "cuda")) == {"peak_memory_bytes": 512,
                                                                    "peak_memory_source": "cuda"}


CONFTEST = """\
import pytest

from roofwatch.timing import HostTimer, StoppingRule, WarmUp


@pytest.fixture(scope="session")
def kernel_timer():
    return HostTimer(rule=StoppingRule(min_samples=5, max_samples=20, max_time_s=0.05),
                     warmup=WarmUp(time_s=0.0, max_calls=2))
"""

SUITE = """\
import numpy as np
import pytest

MIB = 2**20
inputs = np.ones(MIB // 8)


def scale(buffer_mib):
    scratch = np.empty(buffer_mib * MIB // 8)
    scratch[: inputs.size] = inputs * 2.0
    return scratch[: inputs.size]


@pytest.mark.parametrize("buffer_mib", [1, 2])
def test_scale(kernel_benchmark, buffer_mib):
    kernel_benchmark(lambda: scale(buffer_mib), flops=inputs.size, bytes=16 * inputs.size, dtype="fp64",
                     shape=str(inputs.size), impl="numpy")


def test_plain(benchmark):
    benchmark.extra_info["peak_memory_bytes"] = 3 * MIB  # a plain benchmark reports its own
    benchmark(lambda: None)


def test_untracked(benchmark):
    benchmark(lambda: None)
"""


def test_a_suite_reports_each_benchmarks_peak_and_roofwatch_derives_a_memory_suite(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_suite.py").write_text(SUITE)
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "pytest_benchmark.plugin",
         "-p", "roofwatch.pytest_plugin", "--benchmark-only", f"--benchmark-json={out}"],
        cwd=tmp_path, env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}, capture_output=True, text=True,
        timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    raw = {entry["name"]: entry["extra_info"] for entry in json.loads(out.read_text())["benchmarks"]}
    assert raw["test_scale[1]"]["peak_memory_source"] == "tracemalloc"
    # The scratch buffer, doubled by the parameter; the product of inputs * 2.0 (1 MiB) lives alongside it.
    one, two = raw["test_scale[1]"]["peak_memory_bytes"], raw["test_scale[2]"]["peak_memory_bytes"]
    assert 2 * MIB <= one < 2 * MIB + 64 * 1024 and 3 * MIB <= two < 3 * MIB + 64 * 1024, (one, two)

    timed = parse_benchmark_json(out)
    suites = with_memory_suites([SuiteResult(name="benchmarks", kind="benchmark", status="passed",
                                             measurements=timed)])
    assert [s.name for s in suites] == ["benchmarks", "benchmarks:memory"]
    derived = {m.name: m for m in suites[1].measurements}
    assert set(derived) == {"test_scale[1]", "test_scale[2]", "test_plain"}  # test_untracked reports none
    scaled = derived["test_scale[2]"]
    assert (scaled.unit, scaled.median, scaled.samples, scaled.n) == ("B", float(two), [float(two)], 1)
    assert (scaled.params, scaled.dtype, scaled.extra_info["impl"]) == ("2", "fp64", "numpy")
    assert scaled.timing == {"memory_source": "tracemalloc"}
    assert derived["test_plain"].timing == {"memory_source": "reported"} and derived["test_plain"].median == 3 * MIB
    assert all(m.unit == "s" for m in suites[0].measurements)


@pytest.mark.parametrize("value", [0, -5, True, "1 MiB", float("nan"), float("inf"), 2**70, None])
def test_a_peak_that_is_no_size_derives_nothing(value: object) -> None:
    from roofwatch.common.envelope import MeasurementRecord

    record = MeasurementRecord(name="t", median=1e-3, iqr=0, min=1e-3, mean=1e-3, n=3,
                               extra_info={"peak_memory_bytes": value} if value is not None else {})
    suites = with_memory_suites([SuiteResult(name="b", kind="benchmark", status="passed", measurements=[record])])
    assert [s.name for s in suites] == ["b"]
