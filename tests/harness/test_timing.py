"""The timing engine and its pytest-benchmark harness, on CPU.

The statistics are pure functions and are checked against tables and simulation. The GPU
timer's control flow (flush before every sample, graph or eager, caps, telemetry) runs
against a simulated device: CUDA is the one part that cannot run here.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from roofwatch.harness import RecordedClock, extra_info_for
from roofwatch.result_files.suite_results import parse_benchmark_json
from roofwatch.timing import (
    SW_POWER_CAP,
    SW_THERMAL_SLOWDOWN,
    GpuTimer,
    GraphPolicy,
    HostTimer,
    NvmlTelemetry,
    StoppingRule,
    Telemetry,
    WarmUp,
    calls_per_graph,
    clock_normalized,
    default_timer,
    median_ci,
    relative_halfwidth,
    sample_adaptively,
)

# --- the confidence interval of the median -------------------------------------------------


def test_too_few_samples_have_no_interval() -> None:
    assert median_ci([], 0.95) is None
    assert median_ci([3.0, 1.0, 2.0, 5.0, 4.0], 0.95) is None  # best coverage at n=5 is 93.75 %
    assert median_ci([3.0, 1.0, 2.0, 5.0, 4.0, 6.0], 0.95) == (1.0, 6.0)  # n=6: 96.9 %


@pytest.mark.parametrize(("n", "ranks"), [
    # 1-based order statistics of the exact 95 % interval, from binomial tables.
    (10, (2, 9)),
    (20, (6, 15)),
    (100, (40, 61)),
])
def test_interval_is_the_tabulated_pair_of_order_statistics(n: int, ranks: tuple[int, int]) -> None:
    values = [float(i) for i in range(1, n + 1)]
    random.Random(n).shuffle(values)
    assert median_ci(values, 0.95) == (float(ranks[0]), float(ranks[1]))


def test_normal_approximation_joins_the_exact_ranks() -> None:
    exact = median_ci([float(i) for i in range(1, 1001)], 0.95)
    approx = median_ci([float(i) for i in range(1, 1002)], 0.95)
    assert exact is not None and approx is not None
    assert abs(exact[0] - approx[0]) <= 1 and abs(exact[1] - approx[1]) <= 2


def test_interval_covers_the_median_of_a_skewed_distribution_as_promised() -> None:
    rng = random.Random(7)
    true_median = math.log(2)  # of Exp(1)
    trials = 2000
    covered = 0
    for _ in range(trials):
        ci = median_ci([rng.expovariate(1.0) for _ in range(30)], 0.95)
        assert ci is not None
        covered += ci[0] <= true_median <= ci[1]
    # Exact coverage at n=30 is 95.7 %; 2000 trials put 3 standard errors at ±1.4 %.
    assert 0.94 <= covered / trials <= 0.975


def test_relative_halfwidth() -> None:
    assert relative_halfwidth((99.0, 101.0), 100.0) == pytest.approx(0.01)
    assert relative_halfwidth(None, 100.0) == math.inf


# --- the stopping rule ----------------------------------------------------------------------


def test_constant_samples_converge_at_the_minimum() -> None:
    rule = StoppingRule(min_samples=10)
    assert rule.stop_reason([1.0] * 9, elapsed_s=0.0) is None
    assert rule.stop_reason([1.0] * 10, elapsed_s=0.0) == "converged"


def test_noisy_samples_run_to_a_cap() -> None:
    rng = random.Random(1)
    noisy = [1.0 + rng.uniform(-0.2, 0.2) for _ in range(50)]
    rule = StoppingRule(min_samples=10, max_samples=50, max_time_s=10.0)
    assert rule.stop_reason(noisy[:30], elapsed_s=1.0) is None
    assert rule.stop_reason(noisy, elapsed_s=1.0) == "sample cap"
    assert rule.stop_reason(noisy[:30], elapsed_s=10.0) == "time cap"
    # The time cap waits for the floor: no median of two samples.
    assert rule.stop_reason(noisy[:2], elapsed_s=100.0) is None


def test_batches_fill_the_floor_then_grow_by_a_tenth_within_the_caps() -> None:
    rule = StoppingRule(min_samples=10, max_samples=120, max_time_s=1.0)
    assert rule.next_batch(0, 0.0) == 10
    assert rule.next_batch(100, 0.1) == 10
    assert rule.next_batch(115, 0.1) == 5  # the sample cap
    assert rule.next_batch(100, 0.99) == 1  # 0.01 s left at 1 ms per sample: one more


def test_sampling_stops_by_the_rule() -> None:
    now = [0.0]

    def take(k: int) -> list[float]:
        now[0] += k * 0.01
        return [0.01] * k

    samples, reason = sample_adaptively(take, StoppingRule(min_samples=12), clock=lambda: now[0])
    assert (len(samples), reason) == (12, "converged")


def test_graphs_only_for_short_calls() -> None:
    assert calls_per_graph(50e-6) == 1
    assert calls_per_graph(20e-6) == 1
    assert calls_per_graph(5e-6) == 40  # 200 µs per replay
    assert calls_per_graph(1e-9) == GraphPolicy().max_calls
    assert calls_per_graph(150e-6, GraphPolicy(threshold_s=1e-3, target_s=200e-6)) == 2
    assert calls_per_graph(5e-6, GraphPolicy(enabled=False)) == 1


# --- the GPU timer against a simulated device -----------------------------------------------


class FakeGpu:
    """A device whose timeline only kernels advance; ``log`` lists what was enqueued, in order.

    ``kernel_s`` gives the duration of each call (by call number). A graph replay advances
    the timeline by its calls without running Python, as a real replay does.
    """

    l2_bytes = 50 * 2**20

    def __init__(self, kernel_s: Callable[[int], float], flush_s: float = 30e-6,
                 capture_error: Exception | None = None) -> None:
        self.kernel_s = kernel_s
        self.flush_s = flush_s
        self.capture_error = capture_error
        self.now = 0.0
        self.calls = 0
        self.log: list[str] = []
        self.captured: list[int] = []

    def kernel(self) -> int:
        self.now += self.kernel_s(self.calls)
        self.calls += 1
        self.log.append("fn")
        return self.calls

    def event(self) -> Any:
        gpu = self

        class Event:
            at = math.nan

            def record(self) -> None:
                self.at = gpu.now
                gpu.log.append("record")

        return Event()

    def elapsed_s(self, start: Any, end: Any) -> float:
        return float(end.at - start.at)

    def synchronize(self) -> None:
        self.log.append("sync")

    def flush_l2(self) -> None:
        self.now += self.flush_s
        self.log.append("flush")

    def capture(self, fn: Callable[[], object], calls: int) -> Any:
        if self.capture_error is not None:
            raise self.capture_error
        self.captured.append(calls)
        gpu = self

        class Graph:
            def replay(self) -> None:
                for _ in range(calls):
                    gpu.now += gpu.kernel_s(gpu.calls)
                    gpu.calls += 1
                gpu.log.append("replay")

            def reset(self) -> None:
                gpu.log.append("reset")

        return Graph()

    def close(self) -> None:
        self.log.append("close")


class FakeTelemetry:
    def __init__(self, readings: list[Telemetry]) -> None:
        self.readings = readings
        self.count = 0

    def read(self) -> Telemetry:
        self.count += 1
        return self.readings[(self.count - 1) % len(self.readings)]

    def close(self) -> None:
        pass


def _timer(gpu: FakeGpu, **options: Any) -> GpuTimer:
    options.setdefault("warmup", WarmUp(time_s=1e-3, max_calls=50))
    return GpuTimer(gpu, options.pop("telemetry", None), clock=lambda: gpu.now, **options)


def _timed_runs(log: list[str], what: str) -> list[int]:
    """Indexes in ``log`` of ``what`` bracketed by two event records."""
    return [i for i in range(1, len(log) - 1) if log[i] == what and log[i - 1] == log[i + 1] == "record"]


def test_long_kernels_are_timed_eagerly_with_a_flush_before_every_sample() -> None:
    gpu = FakeGpu(lambda i: 50e-6)
    result = _timer(gpu).measure(gpu.kernel)

    assert result.timer == "cuda_event" and result.calls_per_sample == 1
    assert result.samples == pytest.approx([50e-6] * result.n)
    assert result.stop_reason == "converged" and result.n == 10
    timed = _timed_runs(gpu.log, "fn")
    assert len(timed) == 5 + result.n  # the estimate, then the samples
    assert all(gpu.log[i - 2] == "flush" for i in timed)
    assert gpu.captured == []
    assert result.l2_flush_bytes == 2 * gpu.l2_bytes
    assert result.value == gpu.calls  # what the last call returned


def test_warm_up_runs_to_its_budget_before_anything_is_timed() -> None:
    gpu = FakeGpu(lambda i: 1e-3)
    result = _timer(gpu, warmup=WarmUp(time_s=0.02, max_calls=1000)).measure(gpu.kernel)
    first_timed = _timed_runs(gpu.log, "fn")[0]
    warm = gpu.log[:first_timed].count("fn")
    assert warm == result.warmup_calls - 5
    assert 20 <= warm <= 22  # the first call, then ~20 ms of 1 ms calls (plus flushes)


def test_short_kernels_are_timed_through_a_cuda_graph() -> None:
    gpu = FakeGpu(lambda i: 5e-6)
    result = _timer(gpu).measure(gpu.kernel)

    assert result.timer == "cuda_graph"
    assert gpu.captured == [40] and result.calls_per_sample == 40
    assert result.samples == pytest.approx([5e-6] * result.n)  # a replay divided by its calls
    replays = _timed_runs(gpu.log, "replay")
    assert len(replays) == result.n
    assert all(gpu.log[i - 2] == "flush" for i in replays)
    assert gpu.log[-1] == "reset"  # the graph's memory is given back


def test_a_graph_that_cannot_be_captured_is_timed_eagerly_and_says_why() -> None:
    gpu = FakeGpu(lambda i: 5e-6, capture_error=RuntimeError("operation not permitted when stream is capturing"))
    result = _timer(gpu).measure(gpu.kernel)

    assert result.timer == "cuda_event" and result.calls_per_sample == 1
    assert "capture failed" in result.note and "not permitted" in result.note
    assert result.samples == pytest.approx([5e-6] * result.n)


def test_noise_runs_into_the_sample_cap() -> None:
    rng = random.Random(3)
    gpu = FakeGpu(lambda i: 50e-6 * (1 + rng.uniform(-0.3, 0.3)))
    result = _timer(gpu, rule=StoppingRule(min_samples=10, max_samples=60, max_time_s=10.0)).measure(gpu.kernel)
    assert (result.n, result.stop_reason, result.converged) == (60, "sample cap", False)
    assert result.ci is not None and result.rel_ci_halfwidth > 0.005


def test_noise_runs_into_the_time_cap() -> None:
    rng = random.Random(4)
    gpu = FakeGpu(lambda i: 1e-3 * (1 + rng.uniform(-0.3, 0.3)), flush_s=0.0)
    rule = StoppingRule(min_samples=10, max_samples=10_000, max_time_s=0.05)
    result = _timer(gpu, rule=rule).measure(gpu.kernel)
    assert result.stop_reason == "time cap"
    assert 45 <= result.n <= 60  # ~1 ms per sample, batches sized not to overshoot much


def test_no_flush_when_disabled() -> None:
    gpu = FakeGpu(lambda i: 50e-6)
    result = _timer(gpu, flush_l2=False).measure(gpu.kernel)
    assert "flush" not in gpu.log and result.l2_flush_bytes == 0


def test_telemetry_is_kept_per_sample_and_throttling_flagged() -> None:
    gpu = FakeGpu(lambda i: 50e-6)
    readings = [Telemetry(1980.0, 60.0, 0x1), Telemetry(1755.0, 71.0, SW_THERMAL_SLOWDOWN),
                Telemetry(1980.0, 61.0, 0x0), Telemetry(1830.0, 65.0, SW_POWER_CAP)]
    source = FakeTelemetry(readings)
    result = _timer(gpu, telemetry=source, rule=StoppingRule(min_samples=12)).measure(gpu.kernel)

    assert result.n == 12 and len(result.telemetry) == 12
    assert source.count == 12  # none spent on the warm-up or the estimate
    assert result.throttled_samples == 6  # idle (0x1) is not throttling
    info = extra_info_for(result)
    assert info["sm_clock_mhz"] == 1905.0 and info["sm_clock_mhz_min"] == 1755.0
    assert info["temperature_c_max"] == 71.0
    assert info["throttle_reasons"] == 0x1 | SW_THERMAL_SLOWDOWN | SW_POWER_CAP
    assert info["throttled_samples"] == 6
    assert info["telemetry"]["throttled"][:4] == [False, True, False, True]


class _NvmlError(Exception):
    pass


def _fake_nvml(**calls: Callable[..., Any]) -> SimpleNamespace:
    return SimpleNamespace(NVMLError=_NvmlError, NVML_CLOCK_SM=1, NVML_TEMPERATURE_GPU=0, **calls)


def test_nvml_readings_and_failures() -> None:
    def failing(*args: object) -> int:
        raise _NvmlError("not supported")

    nvml = _fake_nvml(nvmlDeviceGetClockInfo=lambda h, kind: 1980 if kind == 1 else 0,
                      nvmlDeviceGetTemperature=failing,
                      nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0x24,
                      nvmlDeviceGetCurrentClocksThrottleReasons=failing)
    reading = NvmlTelemetry(nvml, handle="gpu0").read()
    assert reading == Telemetry(sm_clock_mhz=1980.0, temperature_c=None, throttle_reasons=0x24)
    assert reading.throttled

    older = _fake_nvml(nvmlDeviceGetClockInfo=failing, nvmlDeviceGetTemperature=lambda h, s: 55,
                       nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: 0x1)
    assert NvmlTelemetry(older, handle="gpu0").read() == Telemetry(None, 55.0, 0x1)


# --- the host timer -------------------------------------------------------------------------


def test_host_timer_times_each_call_with_its_clock() -> None:
    now = [0]

    def call() -> str:
        now[0] += 2_000  # 2 µs per call on the injected clock
        return "done"

    timer = HostTimer(rule=StoppingRule(min_samples=10), warmup=WarmUp(time_s=1e-5, max_calls=100),
                      clock_ns=lambda: now[0])
    result = timer.measure(call)
    assert result.timer == "host" and result.calls_per_sample == 1
    assert result.samples == (2e-6,) * 10 and result.converged
    assert result.warmup_calls == 6  # the first call, then 10 µs of calls
    assert result.value == "done" and result.telemetry == ()


def test_default_timer_without_cuda_is_the_host_timer() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert isinstance(default_timer(), HostTimer)


def test_recorded_clock_replays_samples_exactly() -> None:
    samples = (1e-6, 0.1, 3.3e-5)
    clock = RecordedClock("cuda_event", samples, value="out")
    seen = []
    for _ in samples:
        start = clock()
        assert clock.advance() == "out"
        seen.append(clock() - start)
    assert tuple(seen) == samples and clock.__name__ == "cuda_event"


# --- through pytest-benchmark ---------------------------------------------------------------

CONFTEST = """\
import pytest

from roofwatch.timing import HostTimer, StoppingRule, WarmUp


@pytest.fixture(scope="session")
def kernel_timer():
    return HostTimer(rule=StoppingRule(min_samples=5, max_samples=40, max_time_s=0.2),
                     warmup=WarmUp(time_s=0.0, max_calls=2))
"""

SUITE = """\
import pytest

from roofwatch.harness import report
from roofwatch.timing import Telemetry, TimingResult


@pytest.mark.parametrize("n", [64, 4096])
def test_sum(kernel_benchmark, n):
    data = list(range(n))
    result = kernel_benchmark(lambda: sum(data), flops=n, bytes=8 * n, dtype="fp64", shape=f"{n}",
                              impl="python", group="sum")
    assert result == sum(data)


def test_gpu_result(benchmark):
    result = TimingResult(
        timer="cuda_graph", samples=(3e-6, 2e-6, 4e-6), calls_per_sample=40, stop_reason="time cap",
        confidence=0.95, ci=None, warmup_calls=7, l2_flush_bytes=100 * 2**20, value="out",
        telemetry=(Telemetry(1980.0, 61.0, 0), Telemetry(1755.0, 63.0, 0x20), Telemetry(1980.0, 62.0, 0x1)))
    benchmark.extra_info.update(flops=1.0e6, bytes=2.0e6, dtype="bf16", shape="1x1", impl="triton")
    assert report(benchmark, result) == "out"
"""


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # Only pytest-benchmark and roofwatch's plugin: other installed plugins would cost seconds of start-up here.
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "pytest_benchmark.plugin",
         "-p", "roofwatch.pytest_plugin", *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=False,
    )


@pytest.fixture(scope="module")
def harness_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real pytest run of a suite using ``kernel_benchmark``, writing ``--benchmark-json``."""
    folder = tmp_path_factory.mktemp("harness-suite")
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "test_harness_suite.py").write_text(SUITE)
    out = folder / "bench.json"
    done = _pytest(folder, "--benchmark-only", f"--benchmark-json={out}")
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_harness_output_is_standard_benchmark_json_that_roofwatch_reads(harness_json: Path) -> None:
    raw = {entry["name"]: entry for entry in json.loads(harness_json.read_text())["benchmarks"]}
    parsed = {m.name: m for m in parse_benchmark_json(harness_json)}
    assert set(parsed) == {"test_sum[64]", "test_sum[4096]", "test_gpu_result"}

    entry, record = raw["test_sum[4096]"], parsed["test_sum[4096]"]
    # pytest-benchmark computed its statistics from exactly our samples.
    assert entry["stats"]["data"] == entry["extra_info"]["raw_samples"]
    assert entry["options"]["timer"] == "host" and entry["stats"]["iterations"] == 1
    assert 5 <= record.n == len(record.samples) <= 40
    assert record.group == "sum" and record.params == "4096"
    assert (record.flops, record.bytes, record.dtype, record.shape) == (4096.0, 32768.0, "fp64", "4096")
    extra = record.extra_info
    assert extra["impl"] == "python" and extra["timer"] == "host"
    assert extra["stop_reason"] in ("converged", "sample cap", "time cap")
    assert extra["converged"] is (extra["stop_reason"] == "converged")
    assert extra["ci_low"] <= record.median <= extra["ci_high"]

    entry, record = raw["test_gpu_result"], parsed["test_gpu_result"]
    assert entry["stats"]["data"] == [3e-6, 2e-6, 4e-6] and record.median == 3e-6
    assert entry["options"]["timer"] == "cuda_graph"
    assert record.extra_info["calls_per_sample"] == 40 and record.extra_info["converged"] is False
    assert record.extra_info["sm_clock_mhz"] == 1980.0  # what ingest stores as the clock
    assert record.extra_info["throttled_samples"] == 1
    assert entry["extra_info"]["telemetry"]["temperature_c"] == [61.0, 63.0, 62.0]
    assert "ci_low" not in record.extra_info  # None: three samples bound no median


def test_disabled_benchmarks_run_the_call_once_untimed(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_harness_suite.py").write_text(SUITE.split("\n\ndef test_gpu_result")[0] + "\n")
    done = _pytest(tmp_path, "--benchmark-disable")
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout + done.stderr


class HeldGpu(FakeGpu):
    """A device that records each stream hold: the wait that keeps it ahead of the host."""

    def __init__(self, kernel_s: Callable[[int], float]) -> None:
        super().__init__(kernel_s)
        self.holds: list[float] = []

    def hold(self, seconds: float) -> None:
        self.holds.append(seconds)
        self.log.append("hold")


def test_every_batch_starts_with_a_hold_long_enough_for_the_host_to_enqueue_it() -> None:
    gpu = HeldGpu(lambda i: 50e-6)
    _timer(gpu).measure(gpu.kernel)
    # Each batch: a hold, then its samples; never a sample enqueued while the device could idle.
    batches = [i for i, entry in enumerate(gpu.log) if entry == "hold"]
    assert batches and all(gpu.log[i + 1] == "flush" for i in batches)
    assert all(seconds > 0 for seconds in gpu.holds)


def test_the_hold_can_be_switched_off_to_show_what_it_prevents() -> None:
    gpu = HeldGpu(lambda i: 50e-6)
    _timer(gpu, hold_stream=False).measure(gpu.kernel)
    assert gpu.holds == []


def test_a_longer_hold_margin_holds_proportionally_longer() -> None:
    short, long = HeldGpu(lambda i: 50e-6), HeldGpu(lambda i: 50e-6)
    _timer(short).measure(short.kernel)
    _timer(long, hold_margin=20.0).measure(long.kernel)
    # Each hold is the margin times the host's enqueue time; the first batch's is the
    # timer's estimate, the same for both, so their first holds are exactly in the margins' ratio.
    assert long.holds[0] == pytest.approx(10 * short.holds[0])


@pytest.mark.parametrize(("samples", "clocks", "reference", "expected"), [
    # A sample at 1800 MHz against a 1980 MHz reference counts as 1800/1980 of its time.
    ([1.0, 2.0], [1980.0, 1800.0], 1980.0, [1.0, 2.0 * 1800 / 1980]),
    ([3.0], [990.0], 1980.0, [1.5]),
    ([], [], 1980.0, []),
    # One sample without a reading: no partly normalized series.
    ([1.0, 1.0], [1980.0, None], 1980.0, None),
    ([1.0], [0.0], 1980.0, None),
    # No reference clock (NVML could not say): nothing to normalize to.
    ([1.0], [1980.0], 0.0, None),
])
def test_clock_normalized_samples(samples: list[float], clocks: list[float | None], reference: float,
                                  expected: list[float] | None) -> None:
    found = clock_normalized(samples, clocks, reference)
    if expected is None:
        assert found is None
    else:
        assert found == pytest.approx(expected)


def test_clock_normalized_needs_one_reading_per_sample() -> None:
    with pytest.raises(ValueError, match="2 samples but 1 clock"):
        clock_normalized([1.0, 2.0], [1980.0], 1980.0)
