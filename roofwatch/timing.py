"""How long one kernel call takes: CUDA events on a GPU, the host clock elsewhere.

Method (DESIGN §5), for ``GpuTimer``:

1. Warm-up: one call (JIT compilation, lazy initialisation), then calls until a time or call
   budget is spent, so clocks have ramped and caches, TLBs and allocators are in steady state.
2. Before each sample, 2 × L2 bytes are written (``L2_cache_size`` of the device), so the
   kernel starts from a cold L2, as it would after other work, not from its own leftovers.
3. A sample is one call bracketed by a pair of CUDA events. When one call takes under
   ``GraphPolicy.threshold_s`` (~20 µs), launch overhead would dominate: ``calls`` calls are
   captured in a CUDA graph, a sample is one replay (one L2 flush before it) and is divided by
   ``calls``.
   Before each batch of samples the stream is *held*: a device-side wait (``hold``) long
   enough for the host to enqueue the whole batch, so the GPU never catches up with the host
   between a start event and its kernel. Without it, a kernel whose host-side launch is slow
   (a Triton launcher: tens of µs of Python) is timed with the launch latency inside the event
   interval whenever the flush before it finishes first — on an H200 that made a 68.5 µs fused
   RMSNorm (CUPTI's time) read 70–140 µs by events, bimodal, with a share of slow samples that
   changed from process to process (docs/performance.md, "The GPU slow mode"). nvbench's
   blocking kernel does the same.
4. Adaptive count: samples are taken in batches until the order-statistic confidence
   interval of the median (``median_ci``) is within ±``target_rel_ci`` (0.5 %) of the median,
   or a sample or time cap is hit (``StoppingRule``). The result says which (``stop_reason``).
5. NVML telemetry (SM clock, temperature, clock-event/throttle reasons) is read per sample,
   while the sample is in flight; samples whose reasons include a power or thermal
   slowdown are flagged ``throttled``. All raw samples are kept, in the order taken.

``HostTimer`` has the same interface and stopping rule, timing each call with
``time.perf_counter_ns`` (no flush, no graphs, no telemetry): the CPU is then the device.

Limits worth knowing. In graph mode the flush precedes each replay, not each call, so calls
after the first find what the previous call left in L2: a kernel whose working set fits in L2
is measured partly warm. The host timer never flushes CPU caches. Either can put a result
above the DRAM roof, which roofwatch's ingest reports as a harness error, never as a
fraction above 1. The flush writes, so up to an L2 of dirty lines is written back while the
next sample runs (the convention of nvbench and ``triton.testing.do_bench``).

Everything that touches CUDA or NVML sits behind two small protocols, ``GpuBackend`` and
``TelemetrySource``, and the host clock is a parameter, so the control flow is tested on CPU
with fakes. Times are seconds throughout unless a name says otherwise.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Protocol

__all__ = [
    "GpuBackend",
    "GpuTimer",
    "GraphPolicy",
    "HostTimer",
    "NoTelemetry",
    "NvmlTelemetry",
    "StoppingRule",
    "Telemetry",
    "TelemetrySource",
    "Timer",
    "TimingResult",
    "TorchCudaBackend",
    "WarmUp",
    "calls_per_graph",
    "clock_normalized",
    "default_timer",
    "median_ci",
    "relative_halfwidth",
    "sample_adaptively",
]

# NVML clock-event ("throttle") reason bits, nvml.h ``nvmlClocksEventReason*``. Idle, the
# application-clock setting, sync boost and display clocks are not slowdowns of a busy GPU;
# the power cap, hardware slowdown, thermal limits and the power brake are.
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
SW_THERMAL_SLOWDOWN = 0x20
HW_THERMAL_SLOWDOWN = 0x40
HW_POWER_BRAKE_SLOWDOWN = 0x80
THROTTLE_MASK = SW_POWER_CAP | HW_SLOWDOWN | SW_THERMAL_SLOWDOWN | HW_THERMAL_SLOWDOWN | HW_POWER_BRAKE_SLOWDOWN

# Exact binomial tail sums up to this many samples; the normal approximation above it is
# within one rank of the exact interval there and keeps each check O(n log n).
_EXACT_CI_LIMIT = 1000


# --- statistics: pure functions -------------------------------------------------------------


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """Distribution-free confidence interval of the median: a pair of order statistics.

    ``[x_(k), x_(n-k+1)]`` covers the population median with probability
    ``1 - 2·P(B ≤ k-1)``, ``B ~ Binomial(n, 1/2)``, whatever the distribution of the samples
    (Conover, *Practical Nonparametric Statistics*, 3rd ed., §3.2). ``k`` is the largest rank
    whose coverage still reaches ``confidence``; exact binomial sums up to
    ``_EXACT_CI_LIMIT`` samples, the normal approximation above.

    Returns ``None`` when there are too few samples for any such interval (fewer than 6 at
    95 %): the median's uncertainty is then unknown, never "zero".
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    n = len(samples)
    if n == 0:
        return None
    tail = (1 - confidence) / 2
    if n <= _EXACT_CI_LIMIT:
        k = _exact_rank(n, tail)
    else:
        z = NormalDist().inv_cdf(1 - tail)
        k = math.floor((n - z * math.sqrt(n)) / 2)
    if k < 1:
        return None
    ordered = sorted(samples)
    return ordered[k - 1], ordered[n - k]


def _exact_rank(n: int, tail: float) -> int:
    """Largest ``k`` with ``P(B ≤ k-1) ≤ tail`` for ``B ~ Binomial(n, 1/2)`` (0 when none)."""
    total = 2**n
    term, cumulative, k = 1, 0, 0  # term = C(n, k)
    while k < n:
        cumulative += term  # now P(B <= k) * 2**n
        if cumulative / total > tail:
            return k
        term = term * (n - k) // (k + 1)
        k += 1
    return k


def relative_halfwidth(ci: tuple[float, float] | None, median: float) -> float:
    """Half the interval's width over the median; ``inf`` when there is no interval."""
    if ci is None or not median > 0:
        return math.inf
    return (ci[1] - ci[0]) / 2 / median


def clock_normalized(samples: Sequence[float], clocks_mhz: Sequence[float | None],
                     reference_mhz: float) -> list[float] | None:
    """Each sample as it would have taken at ``reference_mhz``: ``t · f / f_ref``.

    For work whose time scales with the SM clock (a compute-bound kernel), this removes the
    card's clock from the number: a sample taken at 1,800 MHz counts as 1,800 / 1,980 of its
    time against a 1,980 MHz reference. Memory-bound time does not scale with the SM clock, so
    for it the normalized number is not a better one; it is reported beside wall time, never
    instead of it. ``None`` when any sample lacks a reading (no NVML, a failed query) or the
    reference is not positive: a partly normalized series would mix two units.
    """
    if len(samples) != len(clocks_mhz):
        raise ValueError(f"{len(samples)} samples but {len(clocks_mhz)} clock readings")
    if not reference_mhz > 0 or any(f is None or not f > 0 for f in clocks_mhz):
        return None
    return [t * float(f) / reference_mhz for t, f in zip(samples, clocks_mhz)]  # type: ignore[arg-type]


@dataclass(frozen=True)
class StoppingRule:
    """When to stop sampling.

    Stop as soon as the ``confidence`` interval of the median is within ±``target_rel_ci``
    of it ("converged"), else when ``max_samples`` are taken ("sample cap") or
    ``max_time_s`` of sampling has passed ("time cap"). ``min_samples`` is a floor for
    convergence and for the time cap, so a call longer than ``max_time_s / min_samples``
    overruns the time cap rather than report a median of one or two samples.
    """

    target_rel_ci: float = 0.005
    confidence: float = 0.95
    min_samples: int = 10
    max_samples: int = 2000
    max_time_s: float = 1.0

    def __post_init__(self) -> None:
        if not 1 <= self.min_samples <= self.max_samples:
            raise ValueError(f"need 1 <= min_samples <= max_samples, got {self.min_samples}, {self.max_samples}")

    def stop_reason(self, samples: Sequence[float], elapsed_s: float) -> str | None:
        """Why sampling should stop now, or ``None`` to go on."""
        n = len(samples)
        if n >= self.min_samples:
            ci = median_ci(samples, self.confidence)
            if relative_halfwidth(ci, statistics.median(samples)) <= self.target_rel_ci:
                return "converged"
        if n >= self.max_samples:
            return "sample cap"
        if n >= self.min_samples and elapsed_s >= self.max_time_s:
            return "time cap"
        return None

    def next_batch(self, taken: int, elapsed_s: float) -> int:
        """How many samples to take before checking again (at least 1).

        Up to ``min_samples`` first; then about 10 % more at a time, so the O(n log n) check
        runs O(log n) times; never past the sample cap, nor (at the rate seen so far) far past
        the time cap.
        """
        if taken < self.min_samples:
            return self.min_samples - taken
        batch = max(1, taken // 10)
        batch = min(batch, self.max_samples - taken)
        if taken and elapsed_s > 0:
            per_sample = elapsed_s / taken
            batch = min(batch, max(1, int((self.max_time_s - elapsed_s) / per_sample)))
        return max(1, batch)


def sample_adaptively(take: Callable[[int], Sequence[float]], rule: StoppingRule,
                      clock: Callable[[], float] = time.perf_counter) -> tuple[list[float], str]:
    """Call ``take(k)`` (k new samples, seconds) until ``rule`` says stop; samples and why."""
    start = clock()
    samples: list[float] = []
    while True:
        batch = rule.next_batch(len(samples), clock() - start)
        samples.extend(take(batch))
        reason = rule.stop_reason(samples, clock() - start)
        if reason is not None:
            return samples, reason


@dataclass(frozen=True)
class WarmUp:
    """Calls before sampling: one first call, then until ``time_s`` or ``max_calls``."""

    time_s: float = 0.1
    max_calls: int = 1000


@dataclass(frozen=True)
class GraphPolicy:
    """When and how to time through a CUDA graph.

    A call estimated under ``threshold_s`` is captured ``calls_per_graph`` times into one
    graph, enough for a replay to last about ``target_s`` (at most ``max_calls`` calls).
    """

    enabled: bool = True
    threshold_s: float = 20e-6
    target_s: float = 200e-6
    max_calls: int = 500


def calls_per_graph(estimate_s: float, policy: GraphPolicy = GraphPolicy()) -> int:
    """Calls to capture per graph replay for a call of ``estimate_s``; 1 means no graph."""
    if not policy.enabled or estimate_s >= policy.threshold_s:
        return 1
    calls = math.ceil(policy.target_s / max(estimate_s, 1e-9))
    return max(2, min(policy.max_calls, calls))


# --- telemetry ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Telemetry:
    """One NVML reading: SM clock (MHz), GPU temperature (°C), clock-event reason bits."""

    sm_clock_mhz: float | None = None
    temperature_c: float | None = None
    throttle_reasons: int | None = None

    @property
    def throttled(self) -> bool:
        """A power or thermal slowdown was active (``THROTTLE_MASK``)."""
        return bool((self.throttle_reasons or 0) & THROTTLE_MASK)


class TelemetrySource(Protocol):
    def read(self) -> Telemetry: ...

    def close(self) -> None: ...


class NoTelemetry:
    """No NVML here (a CPU, or nvidia-ml-py not installed): every reading is empty."""

    def read(self) -> Telemetry:
        return Telemetry()

    def close(self) -> None:
        pass


class NvmlTelemetry:
    """Readings of one GPU through ``pynvml`` (package ``nvidia-ml-py``).

    ``nvml`` is the module, a parameter so tests can hand in a fake one. A failing query
    gives ``None`` for that field, never an exception in the middle of a measurement.
    """

    def __init__(self, nvml: Any, handle: Any) -> None:
        self._nvml = nvml
        self._handle = handle
        # Renamed in recent drivers' bindings ("throttle" became "event"); same bits.
        self._reasons: Callable[[Any], int] | None = (
            getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None))

    @classmethod
    def open(cls, uuid: str | None = None, index: int | None = None) -> NvmlTelemetry | None:
        """The GPU with CUDA ``uuid`` (as torch reports it), else NVML ``index``; ``None`` without NVML.

        Prefer the UUID: NVML numbers GPUs in PCI order and ignores ``CUDA_VISIBLE_DEVICES``,
        so CUDA's device 0 is not NVML's 0 on a worker pinned to another GPU.
        """
        try:
            import pynvml
        except ImportError:
            return None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError:
            return None
        lookups: list[Callable[[], Any]] = []
        if uuid:
            name = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
            # bytes: older bindings pass the argument to ctypes as is.
            lookups.append(lambda: pynvml.nvmlDeviceGetHandleByUUID(name.encode()))
        if index is not None:
            lookups.append(lambda: pynvml.nvmlDeviceGetHandleByIndex(index))
        for lookup in lookups:
            try:
                return cls(pynvml, lookup())
            except pynvml.NVMLError:
                continue
        pynvml.nvmlShutdown()
        return None

    def read(self) -> Telemetry:
        nvml, handle, reasons = self._nvml, self._handle, self._reasons
        return Telemetry(
            sm_clock_mhz=self._query(lambda: float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))),
            temperature_c=self._query(
                lambda: float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))),
            throttle_reasons=None if reasons is None else self._query(lambda: int(reasons(handle))),
        )

    def _query(self, read: Callable[[], Any]) -> Any:
        try:
            return read()
        except self._nvml.NVMLError:
            return None

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError:
            pass


# --- results --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimingResult:
    """What a timer measured for one callable.

    ``samples`` are seconds per call, in the order taken (a graph replay's time is already
    divided by ``calls_per_sample``); ``telemetry`` has one reading per sample on a GPU and
    is empty otherwise; ``ci`` is the ``confidence`` interval of the median (seconds), or
    ``None`` when too few samples allow one. ``value`` is what the last eager call returned.
    """

    timer: str  # "cuda_event", "cuda_graph" or "host"
    samples: tuple[float, ...]
    calls_per_sample: int
    stop_reason: str  # "converged", "sample cap" or "time cap"
    confidence: float
    ci: tuple[float, float] | None
    warmup_calls: int
    telemetry: tuple[Telemetry, ...] = ()
    l2_flush_bytes: int = 0
    note: str = ""
    value: object = field(default=None, repr=False, compare=False)

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def converged(self) -> bool:
        return self.stop_reason == "converged"

    @property
    def rel_ci_halfwidth(self) -> float:
        return relative_halfwidth(self.ci, self.median)

    @property
    def throttled_samples(self) -> int:
        return sum(t.throttled for t in self.telemetry)


class Timer(Protocol):
    name: str

    def measure(self, fn: Callable[[], object]) -> TimingResult: ...

    def close(self) -> None: ...


def _result(timer: str, samples: Sequence[float], reason: str, rule: StoppingRule, **rest: Any) -> TimingResult:
    return TimingResult(timer=timer, samples=tuple(samples), stop_reason=reason, confidence=rule.confidence,
                        ci=median_ci(samples, rule.confidence), **rest)


# --- host timer -----------------------------------------------------------------------------

HOST_RULE = StoppingRule(max_samples=1000, max_time_s=1.0)
HOST_WARMUP = WarmUp(time_s=0.05, max_calls=100)


class HostTimer:
    """Each sample is one call timed with the host clock (``perf_counter_ns`` by default)."""

    name = "host"

    def __init__(self, rule: StoppingRule = HOST_RULE, warmup: WarmUp = HOST_WARMUP,
                 clock_ns: Callable[[], int] = time.perf_counter_ns) -> None:
        self.rule = rule
        self.warmup = warmup
        self._clock_ns = clock_ns

    def _seconds(self) -> float:
        return self._clock_ns() / 1e9

    def measure(self, fn: Callable[[], object]) -> TimingResult:
        value = fn()
        calls = 1
        start = self._seconds()
        while calls < self.warmup.max_calls and self._seconds() - start < self.warmup.time_s:
            value = fn()
            calls += 1

        def take(k: int) -> list[float]:
            nonlocal value
            out = []
            for _ in range(k):
                t0 = self._clock_ns()
                value = fn()
                out.append((self._clock_ns() - t0) / 1e9)
            return out

        samples, reason = sample_adaptively(take, self.rule, self._seconds)
        return _result("host", samples, reason, self.rule, calls_per_sample=1, warmup_calls=calls, value=value)

    def close(self) -> None:
        pass


# --- GPU timer ------------------------------------------------------------------------------


class TimingEvent(Protocol):
    def record(self) -> None: ...


class CapturedGraph(Protocol):
    def replay(self) -> None: ...

    def reset(self) -> None: ...


class GpuBackend(Protocol):
    """What ``GpuTimer`` needs from CUDA; ``TorchCudaBackend`` is the real one."""

    l2_bytes: int

    def event(self) -> TimingEvent: ...

    def elapsed_s(self, start: TimingEvent, end: TimingEvent) -> float: ...

    def synchronize(self) -> None: ...

    def flush_l2(self) -> None: ...

    def capture(self, fn: Callable[[], object], calls: int) -> CapturedGraph: ...

    def close(self) -> None: ...


class _CudaEvent:
    """A timing event recorded on the stream the work of its device goes to."""

    __slots__ = ("event", "stream")

    def __init__(self, event: Any, stream: Any) -> None:
        self.event, self.stream = event, stream

    def record(self) -> None:
        self.event.record(self.stream)


class TorchCudaBackend:
    """CUDA through torch on one device: events, a 2 × L2 flush buffer, graph capture."""

    def __init__(self, device: Any = None) -> None:
        import torch

        self._torch = torch
        self.device = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
        properties = torch.cuda.get_device_properties(self.device)
        self.l2_bytes = int(properties.L2_cache_size)
        self.name = str(properties.name)
        self.uuid = str(getattr(properties, "uuid", "") or "")
        # Written, not read, before each sample: every line of L2 then holds flush data.
        # int32 elements; at least 1 MiB for devices that report no L2.
        elements = max(2 * self.l2_bytes, 1 << 20) // 4
        self._flush = torch.empty(elements, dtype=torch.int32, device=self.device)
        self._sleep_cycles_per_s: float | None = None

    def nvml_index(self) -> int | None:
        """NVML's number for this device, through torch's CUDA_VISIBLE_DEVICES mapping, if it has one."""
        try:
            return int(self._torch.cuda._get_nvml_device_index(self.device))
        except Exception:  # a private helper: absent or failing in some torch builds
            return None

    @property
    def flush_bytes(self) -> int:
        return self._flush.numel() * 4

    def event(self) -> _CudaEvent:
        torch = self._torch
        return _CudaEvent(torch.cuda.Event(enable_timing=True), torch.cuda.current_stream(self.device))

    def elapsed_s(self, start: Any, end: Any) -> float:
        return float(start.event.elapsed_time(end.event)) / 1e3  # torch reports milliseconds

    def synchronize(self) -> None:
        self._torch.cuda.synchronize(self.device)

    def flush_l2(self) -> None:
        self._flush.zero_()

    def hold(self, seconds: float) -> None:
        """Keep this stream busy for about ``seconds`` (a spinning kernel), asynchronously."""
        torch = self._torch
        if self._sleep_cycles_per_s is None:
            self._sleep_cycles_per_s = self._calibrate_sleep()
        cycles = int(min(seconds, MAX_HOLD_S) * self._sleep_cycles_per_s)
        if cycles > 0:
            with torch.cuda.stream(torch.cuda.current_stream(self.device)):
                torch.cuda._sleep(cycles)

    def _calibrate_sleep(self) -> float:
        """Cycles ``torch.cuda._sleep`` spins per second on this device (its clock, as it runs)."""
        torch = self._torch
        cycles = 2_000_000
        torch.cuda._sleep(cycles)  # load the kernel first
        start, end = self.event(), self.event()
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        self.synchronize()
        return cycles / max(self.elapsed_s(start, end), 1e-6)

    def capture(self, fn: Callable[[], object], calls: int) -> Any:
        torch = self._torch
        # torch's rule for capture: run the work a few times on a side stream first, so
        # lazily created handles and workspaces exist before the graph records anything.
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
        self.synchronize()
        return graph

    def close(self) -> None:
        del self._flush
        self._torch.cuda.empty_cache()


# The host's enqueue time of one sample (flush, two events, the call) before it is measured,
# and the safety factor on the measured one: holding too long costs device time only, too
# short lets launch latency into the samples again.
ENQUEUE_ESTIMATE_S = 100e-6
HOLD_MARGIN = 2.0
MAX_HOLD_S = 0.2

GPU_RULE = StoppingRule(max_samples=2000, max_time_s=1.0)
GPU_WARMUP = WarmUp(time_s=0.1, max_calls=1000)
_ESTIMATE_CALLS = 5


class GpuTimer:
    """CUDA-event timer with L2 flush, warm-up, graph mode and NVML telemetry (module docstring)."""

    name = "cuda_event"

    def __init__(self, backend: GpuBackend, telemetry: TelemetrySource | None = None, *,
                 rule: StoppingRule = GPU_RULE, warmup: WarmUp = GPU_WARMUP,
                 graphs: GraphPolicy = GraphPolicy(), flush_l2: bool = True, hold_stream: bool = True,
                 hold_margin: float = HOLD_MARGIN, clock: Callable[[], float] = time.perf_counter) -> None:
        self.backend = backend
        self.telemetry = telemetry or NoTelemetry()
        self.rule = rule
        self.warmup = warmup
        self.graphs = graphs
        self.flush_l2 = flush_l2
        self.hold_stream = hold_stream
        self.hold_margin = hold_margin
        self._clock = clock
        self._last: object = None  # what the latest eager call returned
        self._enqueue_s = ENQUEUE_ESTIMATE_S  # host time to enqueue one sample, measured per batch

    @classmethod
    def for_device(cls, device: Any = None, **options: Any) -> GpuTimer:
        """The real timer on a CUDA device (default: the current one), NVML if available."""
        backend = TorchCudaBackend(device)
        return cls(backend, NvmlTelemetry.open(uuid=backend.uuid, index=backend.nvml_index()), **options)

    def measure(self, fn: Callable[[], object]) -> TimingResult:
        backend = self.backend
        warmup_calls = self._warm_up(fn)
        # The shortest of a few flushed calls: launch gaps only ever add to a sample.
        estimate = min(self._take(fn, _ESTIMATE_CALLS, calls=1, telemetry=None))
        warmup_calls += _ESTIMATE_CALLS

        calls, graph, note = calls_per_graph(estimate, self.graphs), None, ""
        if calls > 1:
            try:
                graph = backend.capture(fn, calls)
            except Exception as exc:  # a call that syncs, allocates on the host or reads back
                calls, note = 1, f"CUDA graph capture failed, timed eagerly: {type(exc).__name__}: {exc}"
                backend.synchronize()

        telemetry: list[Telemetry] = []
        run: Callable[[], object] = graph.replay if graph is not None else fn
        try:
            samples, reason = sample_adaptively(
                lambda k: self._take(run, k, calls=calls, telemetry=telemetry), self.rule, self._clock)
        finally:
            if graph is not None:
                graph.reset()
        return _result(
            "cuda_graph" if graph is not None else "cuda_event", samples, reason, self.rule,
            calls_per_sample=calls, warmup_calls=warmup_calls, telemetry=tuple(telemetry),
            l2_flush_bytes=self._flush_bytes(), note=note, value=self._last,
        )

    def _flush_bytes(self) -> int:
        if not self.flush_l2:
            return 0
        return int(getattr(self.backend, "flush_bytes", 2 * self.backend.l2_bytes))

    def _warm_up(self, fn: Callable[[], object]) -> int:
        backend = self.backend
        if self.flush_l2:
            backend.flush_l2()
        value = fn()  # compiles; not counted against the time budget
        backend.synchronize()
        calls, start = 1, self._clock()
        while calls < self.warmup.max_calls and self._clock() - start < self.warmup.time_s:
            if self.flush_l2:
                backend.flush_l2()
            value = fn()
            backend.synchronize()  # so the host clock sees device time, not launch time
            calls += 1
        self._last = value
        return calls

    def _take(self, run: Callable[[], object], k: int, *, calls: int,
              telemetry: list[Telemetry] | None) -> list[float]:
        """Enqueue ``k`` samples back to back, read telemetry while they run, then wait once.

        Enqueuing the whole batch before any host-side work (NVML queries, waiting) keeps the
        GPU's queue as full as the launch rate allows; each sample's flush also covers the
        host's launch of the sample itself. Reading ``i`` of the ``k`` NVML readings, taken
        while the batch runs, is attributed to sample ``i``.
        """
        backend = self.backend
        hold = getattr(backend, "hold", None) if self.hold_stream else None
        if hold is not None:
            hold(self.hold_margin * self._enqueue_s * k)
        enqueue_start = time.perf_counter()
        pairs = []
        for _ in range(k):
            if self.flush_l2:
                backend.flush_l2()
            start, end = backend.event(), backend.event()
            start.record()
            out = run()
            end.record()
            if calls == 1:
                self._last = out
            pairs.append((start, end))
        self._enqueue_s = (time.perf_counter() - enqueue_start) / k
        if telemetry is not None:
            telemetry.extend(self.telemetry.read() for _ in range(k))
        backend.synchronize()
        return [backend.elapsed_s(start, end) / calls for start, end in pairs]

    def close(self) -> None:
        self.telemetry.close()
        self.backend.close()


def default_timer() -> Timer:
    """``GpuTimer`` on the current CUDA device when there is one, else ``HostTimer``."""
    try:
        import torch
    except ImportError:
        return HostTimer()
    if torch.cuda.is_available():
        return GpuTimer.for_device()
    return HostTimer()
