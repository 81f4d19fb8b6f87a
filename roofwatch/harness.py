"""``kernel_benchmark``: the timers of ``roofwatch.timing`` behind pytest-benchmark's fixture.

The fixture itself is registered by ``roofwatch.pytest_plugin``.

A benchmark calls::

    result = kernel_benchmark(fn, flops=..., bytes=..., dtype="bf16", shape="4096x4096", impl="triton")

``fn`` takes no arguments and launches the work once (inputs allocated beforehand). The
fixture times it with ``GpuTimer`` on a CUDA machine and ``HostTimer`` elsewhere, writes the
declared work and the timing metadata into ``benchmark.extra_info``, and returns what the
last eager call of ``fn`` returned.

How the samples reach pytest-benchmark. pytest-benchmark times a target with a clock of its
own choosing (``--benchmark-timer``, or ``timer=`` on the ``benchmark`` mark) and turns the
differences of two clock readings into its ``Stats``. CUDA events are not a host clock, so
the samples are taken first, then replayed through ``benchmark.pedantic`` with
``rounds = len(samples)``, one iteration, no warm-up, under a ``RecordedClock``: a clock that
stands still except when the target runs, and then moves by exactly the next recorded
sample. pytest-benchmark therefore computes every statistic (min, median, IQR, mean, ops,
``data``) from our samples, prints them in its table, and writes them into
``--benchmark-json``/``--benchmark-save`` files through its own code: the file stays standard
pytest-benchmark JSON and ``options.timer`` names our timer (``cuda_event``, ``cuda_graph``
or ``host``). The one private name used is ``BenchmarkFixture._timer`` (the per-test clock,
public only through the mark, which is fixed before a test runs); ``_install_clock`` checks
that it exists and fails loudly if a pytest-benchmark release renames it. Options that steer
pytest-benchmark's own sampling (``--benchmark-min-rounds``, ``--benchmark-max-time``, ...) do
not apply; ``--benchmark-disable`` runs ``fn`` once untimed, ``--benchmark-skip``/``-only`` work
as for any benchmark.

What ``extra_info`` holds (per call; seconds, bytes, FLOP): ``flops``, ``bytes``, ``dtype``,
``shape``, ``impl`` as declared; ``timer``, ``calls_per_sample`` (graph replays time that many
calls), ``converged``, ``stop_reason``, ``confidence``, ``ci_low``/``ci_high`` (interval of the
median), ``ci_rel_halfwidth``, ``warmup_calls``, ``l2_flush_bytes``, ``raw_samples`` (the
samples, also ``stats.data``); on a GPU with NVML also ``sm_clock_mhz`` (median over samples,
read by roofwatch's ingest as the measurement's clock), ``sm_clock_mhz_min``,
``temperature_c_max``, ``throttled_samples``, ``throttle_reasons`` (OR of the NVML bits seen)
and ``telemetry`` (per-sample lists aligned with the samples); ``peak_memory_bytes`` and
``peak_memory_source``: what one more call after the samples allocated at its peak
(``roofwatch.memory``), which roofwatch tracks as a benchmark of its own.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from typing import Any

from pytest_benchmark.fixture import BenchmarkFixture

from roofwatch import memory
from roofwatch.timing import Timer, TimingResult

__all__ = ["KernelBenchmark", "RecordedClock", "extra_info_for", "report"]


class RecordedClock:
    """A clock for pytest-benchmark that replays recorded samples.

    Each reading returns the time that passed since the previous reading, and time passes
    only inside ``advance``, by the next sample. pytest-benchmark reads once before and once
    after the target, so the difference it records is exactly that sample (no float drift
    from accumulating a running total).
    """

    def __init__(self, name: str, samples: tuple[float, ...], value: object) -> None:
        self.__name__ = name  # pytest-benchmark writes the timer's __name__ into the JSON's options
        self._pending: Iterator[float] = iter(samples)
        self._elapsed = 0.0
        self._value = value

    def __call__(self) -> float:
        elapsed, self._elapsed = self._elapsed, 0.0
        return elapsed

    def advance(self) -> object:
        self._elapsed = next(self._pending)
        return self._value


def extra_info_for(result: TimingResult) -> dict[str, Any]:
    """The timing metadata stored next to the declared work in ``extra_info``."""
    info: dict[str, Any] = {
        "timer": result.timer,
        "calls_per_sample": result.calls_per_sample,
        "converged": result.converged,
        "stop_reason": result.stop_reason,
        "confidence": result.confidence,
        "ci_low": result.ci[0] if result.ci else None,
        "ci_high": result.ci[1] if result.ci else None,
        "ci_rel_halfwidth": result.rel_ci_halfwidth if result.ci else None,
        "warmup_calls": result.warmup_calls,
        "l2_flush_bytes": result.l2_flush_bytes,
        "raw_samples": list(result.samples),
    }
    if result.note:
        info["note"] = result.note
    clocks = [t.sm_clock_mhz for t in result.telemetry if t.sm_clock_mhz is not None]
    temperatures = [t.temperature_c for t in result.telemetry if t.temperature_c is not None]
    reasons = [t.throttle_reasons for t in result.telemetry if t.throttle_reasons is not None]
    if clocks:
        info["sm_clock_mhz"] = statistics.median(clocks)
        info["sm_clock_mhz_min"] = min(clocks)
    if temperatures:
        info["temperature_c_max"] = max(temperatures)
    if reasons:
        seen = 0
        for bits in reasons:
            seen |= bits
        info["throttle_reasons"] = seen
        info["throttled_samples"] = result.throttled_samples
    if clocks or temperatures or reasons:
        info["telemetry"] = {
            "sm_clock_mhz": [t.sm_clock_mhz for t in result.telemetry],
            "temperature_c": [t.temperature_c for t in result.telemetry],
            "throttle_reasons": [t.throttle_reasons for t in result.telemetry],
            "throttled": [t.throttled for t in result.telemetry],
        }
    return info


def _install_clock(benchmark: BenchmarkFixture, clock: RecordedClock) -> None:
    if not hasattr(benchmark, "_timer"):
        raise RuntimeError("this pytest-benchmark has no BenchmarkFixture._timer; roofwatch/harness.py "
                           "must be adapted to how it now chooses its clock")
    benchmark._timer = clock


def report(benchmark: BenchmarkFixture, result: TimingResult) -> object:
    """Make ``result`` the benchmark's statistics (see the module docstring); returns ``result.value``."""
    benchmark.extra_info.update(extra_info_for(result))
    clock = RecordedClock(result.timer, result.samples, result.value)
    _install_clock(benchmark, clock)
    benchmark.pedantic(clock.advance, rounds=result.n, iterations=1, warmup_rounds=0)
    return result.value


class KernelBenchmark:
    """The callable behind the ``kernel_benchmark`` fixture."""

    def __init__(self, benchmark: BenchmarkFixture, timer: Timer) -> None:
        self.benchmark = benchmark
        self.timer = timer

    def __call__(self, fn: Callable[[], object], *, flops: float | None, bytes: float | None, dtype: str, shape: str,
                 impl: str, group: str | None = None, timer: Timer | None = None) -> object:
        """Time ``fn`` and record it; returns what ``fn`` returned on its last eager call.

        ``flops`` and ``bytes`` are the FLOP and compulsory bytes of one call (roofwatch places
        the result on the roofline with them; ``None``: not known yet, so time and peak memory are
        tracked and the roofline is not); ``dtype``, ``shape`` and ``impl`` label the series.
        """
        benchmark = self.benchmark
        if group is not None:
            benchmark.group = group
        benchmark.extra_info.update(flops=flops, bytes=bytes, dtype=dtype, shape=shape, impl=impl)
        if benchmark.disabled:  # --benchmark-disable: run the code once, time nothing
            return benchmark.pedantic(fn)
        result = (timer or self.timer).measure(fn)
        # After the samples, not among them: the allocator's bookkeeping stays out of the timings.
        benchmark.extra_info.update(memory.extra_info_for(memory.peak_memory(fn, result.timer)))
        return report(benchmark, result)
