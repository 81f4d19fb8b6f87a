"""A/B verdicts on a real GPU: false alarms on identical code, planted slowdowns, GEMM stability.

    python -m bench.gpu_ab_check [--rounds R] [--budget-s S] [--workloads copy,matmul,...]
        [--timer harness|no hold|hold x10|graph x10|rotating buffers|no flush]
        [--experiments gemm,flush,none] [--env KEY=VALUE]... [--markdown FILE] [--json FILE]
        [--out-dir DIR] [--fake]

Every round starts two fresh processes, side A and side B (order alternating), each measuring
the same workloads with roofwatch's harness timer (``roofwatch.timing.GpuTimer``: CUDA events,
a 2 × L2 flush and a stream hold before each sample, adaptive sample count), the SM clock read
through NVML for every sample. Between-process noise is what decides an A/B, so nothing is
compared inside one process. Workloads (``FAMILIES``): copies of 64 MiB, 256 MiB and 1 GiB, an
FMA loop, bf16 ``torch.matmul`` at 2048³, 4096³ and 8192³, a bf16 causal attention forward
(``F.scaled_dot_product_attention``, 100 heads of 2048 × 128), and the fused RMSNorm forward at
8192² and 4096 × 16384; each also with 2 %, 5 % and 10 % more work (``planted``: at least the
nominal amount, the exact one reported). From the rounds it reports:

1. **A/A**: every workload of side A against the same workload of side B (identical code):
   the product's verdict (``roofwatch.ab.abtest``) on its GPU statistic, on the
   same statistic of clock-normalized samples (``roofwatch.timing.clock_normalized``: each
   sample scaled to the device's maximum SM clock), and on the per-process median.
2. **Planted slowdowns**: side A's base against side B's variant, detection per size.
3. **Between-process spread** (max / min − 1 over all processes) of each workload's median,
   its GPU statistic, the clock-normalized statistic and its median SM clock, and the
   correlation across processes of the statistic with the clock's period: near 1 when the
   card's clock is what moves it.
4. **GEMM experiments** (``--experiments gemm``): bf16 matmul 4096³ and 8192³ measured in every
   process under each timer variant (``TIMERS``: the harness, no stream hold, a 10 × longer
   hold, 10-call CUDA graphs, rotating A/B/C buffers, no flush), and the cuBLAS kernel each
   process ran (``torch.profiler``): a different algorithm per process shows as more than one.
   ``--experiments flush`` adds the flush variants that found the memory-bound slow mode.

``--timer`` measures every workload with one of the variants instead of the harness's default,
and ``--env`` sets a variable in every measuring process (``CUBLAS_WORKSPACE_CONFIG=:4096:8``
fixes cuBLAS's workspace), so a candidate fix is one more run. Rounds are added up to
``--rounds`` while the time budget allows one more. ``--fake`` runs the same control flow on
the CPU with a modelled device (a timeline advanced by each workload's modelled time; compute
workloads slowed by a per-process SM clock that the modelled NVML reports; the RMSNorm bimodal
in some processes), which is how CI tests it. Needs torch, triton, numpy, scipy, rich and
nvidia-ml-py on the GPU host.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from roofwatch.ab import abtest
from roofwatch.timing import (
    HOLD_MARGIN,
    GpuTimer,
    GraphPolicy,
    NoTelemetry,
    StoppingRule,
    Telemetry,
    TelemetrySource,
    WarmUp,
    clock_normalized,
)

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20
PLANTED = (0.02, 0.05, 0.10)
SLOW_FACTOR = 1.15  # a sample this much above the process's fast mode counts as slow
RULE = StoppingRule(max_samples=400, max_time_s=0.25)
WARMUP = WarmUp(time_s=0.05, max_calls=200)
PROFILED_PROCESSES = 4
ROTATING_SETS = 4  # buffer sets a rotating workload cycles through


# --- workloads: what is measured, and how much more work a planted variant does ------------


@dataclass(frozen=True)
class Family:
    """A measured callable and its size parameter, which the planted variants grow.

    ``base`` is the parameter (bytes, iterations, K, heads, rows), ``grain`` the step it grows
    in (a copy stays 16-byte aligned, a matmul's K a multiple of 16).
    """

    name: str
    kind: str  # "memory" or "compute"
    base: int
    grain: int = 1


FAMILIES = (
    Family("copy 64 MiB", "memory", 64 * MIB, 16),
    Family("copy 256 MiB", "memory", 256 * MIB, 16),
    Family("copy 1 GiB", "memory", 1024 * MIB, 16),
    Family("fma loop", "compute", 4096),
    Family("matmul bf16 2048", "compute", 2048, 16),
    Family("matmul bf16 4096", "compute", 4096, 16),
    Family("matmul bf16 8192", "compute", 8192, 16),
    Family("attention fwd 100x2048x128 causal", "compute", 100),
    Family("rmsnorm fwd 8192x8192", "memory", 8192),
    Family("rmsnorm fwd 4096x16384", "memory", 4096),
)
GEMM_EXPERIMENT_FAMILIES = ("matmul bf16 4096", "matmul bf16 8192")
FLUSH_EXPERIMENT_FAMILIES = ("rmsnorm fwd 8192x8192", "copy 256 MiB")


def grown(base: int, planted: float, grain: int = 1) -> int:
    """``base`` grown by at least ``planted`` (a fraction), rounded up to a multiple of ``grain``."""
    if planted < 0 or base <= 0 or grain <= 0:
        raise ValueError(f"need base > 0, grain > 0 and planted >= 0, got {base}, {grain}, {planted}")
    # Integer arithmetic on the percentage: 4096 * 1.02 in floating point is 4177.92, never 4178 - ε.
    per_mille = round(planted * 1000)
    return -(-base * (1000 + per_mille) // (1000 * grain)) * grain


@dataclass(frozen=True)
class Workload:
    """One family at one planted size; ``planted`` is the nominal extra work."""

    family: Family
    planted: float = 0.0

    @property
    def size(self) -> int:
        return grown(self.family.base, self.planted, self.family.grain) if self.planted else self.family.base

    @property
    def exact_planted(self) -> float:
        """The extra work the variant really does, as a fraction (at least ``planted``)."""
        return self.size / self.family.base - 1

    @property
    def label(self) -> str:
        return self.family.name if not self.planted else f"{self.family.name} +{self.planted:.0%}"


def workloads(selected: Sequence[Family] = FAMILIES) -> list[Workload]:
    return [Workload(family, planted) for family in selected for planted in (0.0, *PLANTED)]


def select_families(spec: str) -> list[Family]:
    """Families whose name contains one of the comma-separated words of ``spec`` ("all": every one)."""
    if spec.strip() == "all":
        return list(FAMILIES)
    words = [word.strip() for word in spec.split(",") if word.strip()]
    chosen = [family for family in FAMILIES if any(word in family.name for word in words)]
    if not chosen:
        raise SystemExit(f"no workload matches {spec!r}; names: {', '.join(f.name for f in FAMILIES)}")
    return chosen


# Timer variants: the harness as configured (``harness``) and one change each.
TIMERS = ("harness", "no hold", "hold x10", "graph x10", "rotating buffers", "no flush")
FLUSHES = ("flush 2xL2 zero (harness)", "harness without the stream hold", "flush L2 memset (nvbench)",
           "flush 256 MiB zero (do_bench)", "flush 2xL2 read", "no flush", "rotating inputs, no flush", "graph x10")


def timer_options(variant: str) -> dict[str, Any]:
    """``GpuTimer`` keyword arguments for a timer variant (``TIMERS``)."""
    options: dict[str, Any] = {"rule": RULE, "warmup": WARMUP}
    if variant == "no hold":
        options["hold_stream"] = False
    elif variant == "hold x10":
        options["hold_margin"] = 10 * HOLD_MARGIN
    elif variant == "graph x10":
        options["graphs"] = GraphPolicy(threshold_s=1.0, target_s=1.0, max_calls=10)
    elif variant == "no flush":
        options["flush_l2"] = False
    elif variant not in ("harness", "rotating buffers"):
        raise ValueError(f"unknown timer variant {variant!r}; one of {', '.join(TIMERS)}")
    return options


# --- the device: real (torch + triton) or modelled -----------------------------------------


class Device(ABC):
    """What a child process measures with: callables per workload, timers per variant."""

    name = ""
    reference_mhz = 0.0  # the SM clock samples are normalized to (the device's maximum)

    @abstractmethod
    def callable_for(self, workload: Workload) -> Callable[[], object]: ...

    @abstractmethod
    def rotating(self, workload: Workload) -> Callable[[], object]: ...

    @abstractmethod
    def timer(self, variant: str = "harness") -> GpuTimer: ...

    @abstractmethod
    def flush_timer(self, flush: str, graphs: GraphPolicy = GraphPolicy(), hold: bool = True) -> GpuTimer: ...

    @abstractmethod
    def profile(self, chosen: Sequence[Workload], calls: int) -> dict[str, Any]: ...


class CudaDevice(Device):
    def __init__(self) -> None:
        import torch

        from roofwatch.timing import NvmlTelemetry, TorchCudaBackend

        self.torch = torch
        self.backend = TorchCudaBackend()
        self.name = self.backend.name
        self.l2 = self.backend.l2_bytes
        self.telemetry: TelemetrySource = (NvmlTelemetry.open(uuid=self.backend.uuid, index=self.backend.nvml_index())
                                           or NoTelemetry())
        self.reference_mhz = self._max_sm_clock()
        torch.manual_seed(0)

    def _max_sm_clock(self) -> float:
        nvml = getattr(self.telemetry, "_nvml", None)
        handle = getattr(self.telemetry, "_handle", None)
        if nvml is None:
            return 0.0
        try:
            return float(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM))
        except nvml.NVMLError:
            return 0.0

    def _copy(self, nbytes: int) -> Callable[[], object]:
        torch = self.torch
        src = torch.randn(nbytes // 2, device="cuda", dtype=torch.bfloat16)
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)

    def _fma(self, iterations: int) -> Callable[[], object]:
        from bench.gpu_fma import fma_loop

        torch = self.torch
        x = torch.randn(132 * 4 * 1024, device="cuda", dtype=torch.float32)
        out = torch.empty_like(x)
        return lambda: fma_loop(x, out, iterations)

    def _matmul(self, n: int, k: int) -> Callable[[], object]:
        torch = self.torch
        a = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        return lambda: torch.matmul(a, b, out=out)

    def _attention(self, heads: int) -> Callable[[], object]:
        torch = self.torch
        import torch.nn.functional as F

        q, k, v = (torch.randn(1, heads, 2048, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def _rmsnorm(self, rows: int, cols: int) -> Callable[[], object]:
        import kernels.rmsnorm as k

        torch = self.torch
        w = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
        x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
        return lambda: k.rmsnorm_forward(x, w, 1e-6)

    def callable_for(self, workload: Workload) -> Callable[[], object]:
        name, size = workload.family.name, workload.size
        if name.startswith("copy"):
            return self._copy(size)
        if name == "fma loop":
            return self._fma(size)
        if name.startswith("matmul"):
            return self._matmul(workload.family.base, size)
        if name.startswith("attention"):
            return self._attention(size)
        cols = 8192 if "8192x8192" in name else 16384
        return self._rmsnorm(size, cols)

    def rotating(self, workload: Workload) -> Callable[[], object]:
        fns = [self.callable_for(workload) for _ in range(ROTATING_SETS)]
        state = {"i": 0}

        def call() -> object:
            state["i"] = (state["i"] + 1) % len(fns)
            return fns[state["i"]]()
        return call

    def timer(self, variant: str = "harness") -> GpuTimer:
        return GpuTimer(self.backend, self.telemetry, **timer_options(variant))

    def flush_timer(self, flush: str, graphs: GraphPolicy = GraphPolicy(), hold: bool = True) -> GpuTimer:
        torch, backend = self.torch, self.backend
        if flush in ("none", "2xL2 zero"):
            flusher = None
        elif flush == "L2 memset":
            buffer = torch.empty(self.l2 // 4, dtype=torch.int32, device="cuda")
            flusher = buffer.zero_
        elif flush == "256 MiB zero":
            buffer = torch.empty(256 * MIB // 4, dtype=torch.int32, device="cuda")
            flusher = buffer.zero_
        elif flush == "2xL2 read":
            buffer = torch.ones(2 * self.l2 // 4, dtype=torch.int32, device="cuda")
            flusher = lambda: buffer.sum(dtype=torch.int64)  # noqa: E731
        else:
            raise ValueError(flush)
        use = _FlushOverride(backend, flusher) if flusher is not None else backend
        return GpuTimer(use, self.telemetry, rule=RULE, warmup=WARMUP, graphs=graphs, flush_l2=flush != "none",
                        hold_stream=hold)

    def profile(self, chosen: Sequence[Workload], calls: int) -> dict[str, Any]:
        """The kernels ``calls`` flushed calls of each workload launch: names (counted) and
        durations (µs), from CUPTI, in one profiler session (starting one costs seconds)."""
        torch = self.torch
        try:
            from torch.profiler import ProfilerActivity, profile

            fns = [self.callable_for(workload) for workload in chosen]
            for fn in fns:
                for _ in range(3):
                    fn()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for fn in fns:
                    for _ in range(calls):
                        self.backend.flush_l2()
                        fn()
                torch.cuda.synchronize()
            events = sorted((e for e in prof.events() if str(e.device_type).endswith("CUDA")),
                            key=lambda e: e.time_range.start)
            # The flush (a fill kernel) starts every call: the kernels between two fills are one
            # call's, and the calls come in the order launched.
            calls_seen: list[list[Any]] = []
            for event in events:
                if "fill" in event.name.lower():
                    calls_seen.append([])
                elif calls_seen:
                    calls_seen[-1].append(event)
            result: dict[str, Any] = {}
            for i, workload in enumerate(chosen):
                mine = [e for call in calls_seen[i * calls:(i + 1) * calls] for e in call]
                # Per kernel: cuBLAS and SDPA launch a Memset before the GEMM, and one median over
                # both would fall between them.
                by_kernel: dict[str, list[float]] = {}
                for event in mine:
                    duration = float(event.time_range.end - event.time_range.start)
                    if duration > 0:
                        by_kernel.setdefault(event.name, []).append(duration)
                result[workload.family.name] = {"kernels": dict(Counter(e.name for e in mine)),
                                                "durations_by_kernel_us": by_kernel}
            return result
        except Exception as exc:  # the profiler's API and CUPTI vary by version and host
            return {workload.family.name: {"error": f"profiler unavailable: {type(exc).__name__}: {exc}"}
                    for workload in chosen}


class _FlushOverride:
    """The real backend with another way of clearing L2 before each sample."""

    def __init__(self, backend: Any, flusher: Callable[[], object]) -> None:
        self._backend, self._flusher = backend, flusher
        self.l2_bytes = backend.l2_bytes

    def flush_l2(self) -> None:
        self._flusher()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)


class FakeDevice(Device):
    """A modelled GPU on the CPU: a timeline that each call advances by its modelled time.

    Memory workloads take bytes / 3 TB/s, compute ones FLOP / 500 TFLOP/s at the maximum
    clock, times the exact planted growth; every sample gets 0.3 % normal jitter. Two of the
    real device's troubles are modelled: compute work runs at a per-process SM clock drawn
    from 1,830–1,980 MHz (a power-capped card settling differently each time), which the
    modelled NVML reports with each sample; and the fused RMSNorm draws a per-process share
    of slow samples (0–60 %), 35 % slower.
    """

    name = "modelled GPU (fake)"
    l2_bytes = 50 * MIB
    reference_mhz = 1980.0

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.now = 0.0
        self.slow_share = float(self.rng.uniform(0.0, 0.6))
        self.compute_mhz = float(self.rng.uniform(1830.0, 1980.0))
        self.clock_mhz = self.reference_mhz  # the SM clock of the work last run

    # GpuBackend
    def event(self) -> Any:
        device = self

        class Event:
            at = 0.0

            def record(self) -> None:
                self.at = device.now
        return Event()

    def elapsed_s(self, start: Any, end: Any) -> float:
        return float(end.at - start.at)

    def synchronize(self) -> None:
        pass

    def flush_l2(self) -> None:
        self.now += 20e-6

    def capture(self, fn: Callable[[], object], calls: int) -> Any:
        class Graph:
            def replay(self) -> None:
                for _ in range(calls):
                    fn()

            def reset(self) -> None:
                pass
        return Graph()

    def close(self) -> None:
        pass

    # TelemetrySource
    def read(self) -> Telemetry:
        return Telemetry(sm_clock_mhz=round(self.clock_mhz), temperature_c=60.0, throttle_reasons=0)

    def _advance(self, seconds: float, compute: bool, bimodal: bool = False) -> Callable[[], object]:
        def call() -> object:
            slow = bimodal and self.rng.random() < self.slow_share
            self.clock_mhz = self.compute_mhz if compute else self.reference_mhz
            scale = self.reference_mhz / self.clock_mhz
            self.now += seconds * scale * (1.35 if slow else 1.0) * (1 + 0.003 * float(self.rng.standard_normal()))
            return None
        return call

    def callable_for(self, workload: Workload) -> Callable[[], object]:
        family, grow = workload.family, workload.size / workload.family.base
        name = family.name
        if name.startswith("copy"):
            return self._advance(2 * family.base * grow / 3e12, compute=False)
        if name == "fma loop":
            return self._advance(2 * 132 * 4 * 1024 * 4096 * grow / 500e12 + 5e-6, compute=True)
        if name.startswith("matmul"):
            return self._advance(2 * family.base ** 3 * grow / 500e12, compute=True)
        if name.startswith("attention"):
            return self._advance(2 * 100 * 2048 ** 2 * 128 * grow / 500e12, compute=True)
        return self._advance(2 * 8192 * 8192 * 2 * grow / 3e12, compute=False, bimodal="8192x8192" in name)

    def rotating(self, workload: Workload) -> Callable[[], object]:
        return self.callable_for(workload)

    def _timer(self, **options: Any) -> GpuTimer:
        return GpuTimer(self, self, clock=lambda: self.now, **options)

    def timer(self, variant: str = "harness") -> GpuTimer:
        return self._timer(**timer_options(variant))

    def flush_timer(self, flush: str, graphs: GraphPolicy = GraphPolicy(), hold: bool = True) -> GpuTimer:
        return self._timer(rule=RULE, warmup=WARMUP, graphs=graphs, flush_l2=flush != "none", hold_stream=hold)

    def profile(self, chosen: Sequence[Workload], calls: int) -> dict[str, Any]:
        # Two kernels per call, as cuBLAS runs them at 4096³: a short Memset and the GEMM.
        found = {}
        for w in chosen:
            fn, name, times = self.callable_for(w), "modelled_" + w.family.name.split()[0], []
            for _ in range(calls):
                start = self.now
                fn()
                times.append(1e6 * (self.now - start))
            found[w.family.name] = {"kernels": {"Memset (Device)": calls, name: calls},
                                    "durations_by_kernel_us": {"Memset (Device)": [1.0] * calls, name: times}}
        return found


# --- one process ---------------------------------------------------------------------------


def summary(samples: Sequence[float], timer: str, telemetry: Sequence[Telemetry] = (),
            reference_mhz: float = 0.0) -> dict[str, Any]:
    """What the parent needs of one measurement (seconds), with a bounded sample of the raw times.

    ``value`` is the process's GPU statistic (``abtest.process_value``); ``value_at_ref`` the
    same statistic of the clock-normalized samples, ``None`` without a clock for every sample.
    """
    s = np.sort(np.asarray(samples, dtype=float))
    median = float(np.median(s))
    fast = float(np.percentile(s, abtest.FAST_MODE_QUANTILE))
    keep = s if len(s) <= 400 else np.asarray(samples)[:: math.ceil(len(s) / 400)]
    clocks = [t.sm_clock_mhz for t in telemetry]
    normalized = clock_normalized(samples, clocks, reference_mhz) if len(clocks) == len(samples) else None
    known = [float(f) for f in clocks if f]
    return {"n": len(s), "median": median, "p10": fast, "p90": float(np.percentile(s, 90)), "min": float(s[0]),
            "value": abtest.process_value(list(samples), median, timer),
            "value_at_ref": (abtest.process_value(normalized, float(np.median(normalized)), timer)
                             if normalized else None),
            "sm_clock_mhz": float(np.median(known)) if known else None,
            "throttled_share": float(np.mean([t.throttled for t in telemetry])) if telemetry else None,
            "temperature_c": (float(np.median([t.temperature_c for t in telemetry if t.temperature_c is not None]))
                              if any(t.temperature_c is not None for t in telemetry) else None),
            "slow_share": float(np.mean(s > SLOW_FACTOR * fast)), "timer": timer,
            "samples": [float(x) for x in keep]}


def _measure(device: Device, timer: GpuTimer, fn: Callable[[], object]) -> dict[str, Any]:
    found = timer.measure(fn)
    return summary(found.samples, found.timer, found.telemetry, device.reference_mhz)


def _flush_experiment(device: Device, workload: Workload, name: str, fn: Callable[[], object]) -> dict[str, Any]:
    if name.startswith("flush"):
        timer = device.flush_timer(name.removeprefix("flush ").split(" (")[0])
    elif name == "harness without the stream hold":
        timer = device.flush_timer("2xL2 zero", hold=False)
    elif name == "no flush":
        timer = device.flush_timer("none")
    elif name.startswith("rotating"):
        return _measure(device, device.flush_timer("none"), device.rotating(workload))
    else:
        timer = device.flush_timer("2xL2 zero", GraphPolicy(threshold_s=1.0, target_s=1.0, max_calls=10))
    return _measure(device, timer, fn)


def measure_process(device: Device, index: int, families: Sequence[Family], timer_variant: str,
                    experiments: Sequence[str]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    timer = device.timer(timer_variant)
    for workload in workloads(families):
        fn = device.rotating(workload) if timer_variant == "rotating buffers" else device.callable_for(workload)
        results[workload.label] = _measure(device, timer, fn)
    variants: dict[str, Any] = {}
    by_name = {family.name: family for family in FAMILIES}
    if "gemm" in experiments:
        for name in GEMM_EXPERIMENT_FAMILIES:
            workload = Workload(by_name[name])
            fn = device.callable_for(workload)
            for variant in TIMERS:
                try:
                    use = device.rotating(workload) if variant == "rotating buffers" else fn
                    variants[f"{name} | {variant}"] = _measure(device, device.timer(variant), use)
                except Exception as exc:  # one variant failing on some host must not cost the others
                    variants[f"{name} | {variant}"] = {"error": f"{type(exc).__name__}: {exc}"}
    if "flush" in experiments:
        for name in FLUSH_EXPERIMENT_FAMILIES:
            workload = Workload(by_name[name])
            fn = device.callable_for(workload)
            for variant in FLUSHES:
                try:
                    variants[f"{name} | {variant}"] = _flush_experiment(device, workload, variant, fn)
                except Exception as exc:
                    variants[f"{name} | {variant}"] = {"error": f"{type(exc).__name__}: {exc}"}
    # The kernels every process ran where a library picks them (cuBLAS, SDPA), and the first
    # processes' kernel times of the flush experiments' workloads.
    profiled_families = [f for f in families if f.name.startswith(("matmul", "attention"))]
    if "flush" in experiments and index < PROFILED_PROCESSES:
        profiled_families += [by_name[name] for name in FLUSH_EXPERIMENT_FAMILIES]
    profiled = device.profile([Workload(f) for f in profiled_families], 20) if profiled_families else {}
    return {"device": device.name, "reference_mhz": device.reference_mhz, "results": results,
            "experiments": variants, "profiled": profiled}


# --- the parent: rounds, verdicts, tables --------------------------------------------------


def run_child(index: int, side: str, args: argparse.Namespace, timeout_s: float) -> dict[str, Any]:
    path = args.out_dir / f"process-{index:02d}-{side}.json"
    argv = [sys.executable, "-m", "bench.gpu_ab_check", "--child", str(index), "--child-out", str(path),
            "--workloads", args.workloads, "--timer", args.timer, "--experiments", args.experiments]
    if args.fake:
        argv.append("--fake")
    env = {**os.environ, **dict(args.env),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"process {index} ({side}) failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    data: dict[str, Any] = json.loads(path.read_text())
    data["side"], data["round"] = side, index // 2
    return data


def spread(values: Sequence[float | None]) -> float:
    """max / min − 1 of positive values (the figure of merit: identical code, other processes);
    NaN when a value is missing or not positive."""
    if not values or any(v is None or not v > 0 for v in values):
        return math.nan
    known = [float(v) for v in values if v is not None]
    return max(known) / min(known) - 1


def correlation(xs: Sequence[float | None], ys: Sequence[float | None]) -> float:
    """Pearson's r of paired values; NaN with a missing value, fewer than 3 pairs or no variation."""
    if len(xs) != len(ys) or len(xs) < 3 or any(v is None for v in (*xs, *ys)):
        return math.nan
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if float(np.std(x)) == 0.0 or float(np.std(y)) == 0.0:
        return math.nan
    return float(np.corrcoef(x, y)[0, 1])


@dataclass(frozen=True)
class SpreadRow:
    label: str
    medians: float
    statistic: float  # the GPU statistic's (fast mode's) spread
    at_reference: float  # the clock-normalized statistic's
    clock: float  # of the per-process median SM clock
    clock_r: float  # correlation of the statistic with 1 / clock across processes


@dataclass(frozen=True)
class VariantRow:
    name: str
    median_us: float
    statistic: float
    at_reference: float
    clock: float
    clock_r: float
    slow: float
    throttled: float
    error: str = ""


@dataclass
class Report:
    device: str
    rounds: int
    wall_s: float
    timer: str
    env: list[tuple[str, str]]
    aa: list[tuple[str, str, abtest.ABVerdict, abtest.ABVerdict | None, abtest.ABVerdict]]
    ladder: list[tuple[str, float, float, abtest.ABVerdict, abtest.ABVerdict | None]]
    spreads: list[SpreadRow]
    variants: list[VariantRow]
    kernels: list[tuple[str, str]]
    profiled: list[tuple[str, str]]


def _values(side: list[dict[str, Any]], label: str, field: str) -> list[Any]:
    return [p["results"][label][field] for p in side]


def _verdicts(pairs: list[tuple[list[Any], list[Any]]]) -> list[abtest.ABVerdict | None]:
    """One A/B verdict per pair of value lists, the pairs with a missing value left out (``None``)."""
    complete = [i for i, (a, b) in enumerate(pairs) if all(v is not None and v > 0 for v in (*a, *b))]
    found = abtest.verdicts([abtest.PairedRounds([float(v) for v in pairs[i][0]], [float(v) for v in pairs[i][1]])
                             for i in complete]) if complete else []
    out: list[abtest.ABVerdict | None] = [None] * len(pairs)
    for i, verdict in zip(complete, found):
        out[i] = verdict
    return out


def _period(clocks: list[Any]) -> list[float | None]:
    return [1.0 / c if c else None for c in clocks]


def _profiled_kernels(found: dict[str, Any]) -> str:
    """CUPTI's view of one workload in one process: the longest kernel's median and p90 (µs), the
    others' medians after it. Raw files without per-kernel durations give one median over every
    kernel entry, said so: with a Memset before each GEMM it falls between the two."""
    by_kernel = {name: times for name, times in (found.get("durations_by_kernel_us") or {}).items() if times}
    if by_kernel:
        ranked = sorted(by_kernel.items(), key=lambda item: statistics.median(item[1]), reverse=True)
        (name, times), rest = ranked[0], ranked[1:]
        text = f"{name[:48]} median {statistics.median(times):.1f} µs, p90 {np.percentile(times, 90):.1f} µs"
        return text + "".join(f", + {other[:48]} {statistics.median(t):.1f} µs" for other, t in rest)
    durations = found.get("durations_us") or []
    if not durations:
        return ""
    return (f"all {len(durations)} kernel entries ({len(found.get('kernels', {}))} kernels a call) median "
            f"{statistics.median(durations):.1f} µs, p90 {np.percentile(durations, 90):.1f} µs")


def analyse(processes: list[dict[str, Any]], wall_s: float, families: Sequence[Family], timer: str = "harness",
            env: Sequence[tuple[str, str]] = ()) -> Report:
    a = [p for p in processes if p["side"] == "A"]
    b = [p for p in processes if p["side"] == "B"]
    rounds = min(len(a), len(b))
    a, b = a[:rounds], b[:rounds]
    chosen = workloads(families)
    labels = [w.label for w in chosen]
    gpu = _verdicts([(_values(a, label, "value"), _values(b, label, "value")) for label in labels])
    at_ref = _verdicts([(_values(a, label, "value_at_ref"), _values(b, label, "value_at_ref")) for label in labels])
    by_median = _verdicts([(_values(a, label, "median"), _values(b, label, "median")) for label in labels])
    aa = []
    for w, g, r, m in zip(chosen, gpu, at_ref, by_median):
        assert g is not None and m is not None, f"{w.label}: a process measured no time"
        aa.append((w.label, w.family.kind, g, r, m))
    planted = [w for w in chosen if w.planted]
    base = {w.family.name: w.label for w in chosen if not w.planted}
    ladder_gpu = _verdicts([(_values(a, base[w.family.name], "value"), _values(b, w.label, "value")) for w in planted])
    ladder_ref = _verdicts([(_values(a, base[w.family.name], "value_at_ref"), _values(b, w.label, "value_at_ref"))
                            for w in planted])
    ladder = []
    for w, g, r in zip(planted, ladder_gpu, ladder_ref):
        assert g is not None
        ladder.append((w.family.name, w.planted, w.exact_planted, g, r))
    spreads = [SpreadRow(label, spread(_values(processes, label, "median")), spread(_values(processes, label, "value")),
                         spread(_values(processes, label, "value_at_ref")),
                         spread(_values(processes, label, "sm_clock_mhz")),
                         correlation(_values(processes, label, "value"),
                                     _period(_values(processes, label, "sm_clock_mhz"))))
               for label in labels]
    variants = []
    for key in processes[0]["experiments"]:
        rows = [p["experiments"][key] for p in processes if "error" not in p["experiments"].get(key, {"error": ""})]
        if not rows:
            errors = {p["experiments"][key].get("error", "") for p in processes}
            variants.append(VariantRow(key, *(math.nan,) * 7, error="; ".join(sorted(errors))[:200]))
            continue
        throttled = [r["throttled_share"] for r in rows if r.get("throttled_share") is not None]
        variants.append(VariantRow(
            key, 1e6 * statistics.median(r["median"] for r in rows), spread([r["value"] for r in rows]),
            spread([r.get("value_at_ref") for r in rows]), spread([r.get("sm_clock_mhz") for r in rows]),
            correlation([r["value"] for r in rows], _period([r.get("sm_clock_mhz") for r in rows])),
            statistics.mean(r["slow_share"] for r in rows), statistics.mean(throttled) if throttled else math.nan))
    kernels, profiled = [], []
    for family in dict.fromkeys(f for p in processes for f in p.get("profiled", {})):
        names: Counter[str] = Counter()
        for p in processes:
            found = p.get("profiled", {}).get(family, {})
            if "kernels" in found:
                names[" + ".join(sorted(found["kernels"]))] += 1
            elif "error" in found:
                names[found["error"][:120]] += 1
        kernels.append((family, "; ".join(f"{count} × {name}" for name, count in names.most_common())))
        for p in processes:
            found = p.get("profiled", {}).get(family, {})
            events: dict[str, Any] = next(
                (p["experiments"][key] for key in p["experiments"]
                 if key.startswith(family) and ("(harness)" in key or key.endswith("| harness"))), {})
            seen = _profiled_kernels(found)
            if seen and "median" in events:
                profiled.append((family, f"{seen}; events median {1e6 * events['median']:.1f} µs, "
                                 f"p90 {1e6 * events['p90']:.1f} µs"))
    return Report(processes[0]["device"], rounds, wall_s, timer, list(env), aa, ladder, spreads, variants, kernels,
                  profiled)


def _fmt_verdict(v: abtest.ABVerdict | None) -> str:
    if v is None:
        return "–"
    if v.rounds < abtest.MIN_ROUNDS:
        return f"{v.direction}"
    return f"{v.direction} {v.change_pct:+.1f}% [{v.ci_low:+.1f}, {v.ci_high:+.1f}]"


def _pct(value: float) -> str:
    return "–" if math.isnan(value) else f"{100 * value:.1f}%"


def _r(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:+.2f}"


def _false(verdicts: Sequence[abtest.ABVerdict | None]) -> str:
    judged = [v for v in verdicts if v is not None]
    if not judged:
        return "–"
    return f"{sum(v.direction in ('regression', 'improvement') for v in judged)} of {len(judged)}"


def tables(report: Report) -> list[tuple[str, list[str], list[list[str]]]]:
    aa_rows = [[label, kind, _fmt_verdict(g), _fmt_verdict(r), _fmt_verdict(m)] for label, kind, g, r, m in report.aa]
    aa_rows.append(["**false changes**", "", _false([g for _, _, g, _, _ in report.aa]),
                    _false([r for _, _, _, r, _ in report.aa]), _false([m for _, _, _, _, m in report.aa])])
    aa_rows.append(["**no change**", "", *(
        f"{sum(v is not None and v.direction == 'none' for v in column)} of {len(report.aa)}"
        for column in ([g for _, _, g, _, _ in report.aa], [r for _, _, _, r, _ in report.aa],
                       [m for _, _, _, _, m in report.aa]))])
    ladder_rows = [[family, f"+{planted:.0%} (+{100 * exact:.2f}%)", _fmt_verdict(g), _fmt_verdict(r),
                    "yes" if g.direction == "regression" else "no"]
                   for family, planted, exact, g, r in report.ladder]
    for size in PLANTED:
        hits = [(g, r) for _, planted, _, g, r in report.ladder if planted == size]
        found_ref = [r for _, r in hits if r is not None]
        ladder_rows.append([f"**detected at +{size:.0%}**", "",
                            f"{sum(g.direction == 'regression' for g, _ in hits)} of {len(hits)}",
                            f"{sum(r.direction == 'regression' for r in found_ref)} of {len(found_ref)}"
                            if found_ref else "–", ""])
    spread_rows = [[s.label, _pct(s.medians), _pct(s.statistic), _pct(s.at_reference), _pct(s.clock), _r(s.clock_r)]
                   for s in report.spreads]
    # A variant is named "workload | variant": two cells, so the header must name both.
    variant_rows = [[*v.name.split(" | ", 1), f"{v.median_us:.1f}" + (f" (failed: {v.error})" if v.error else ""),
                     _pct(v.statistic),
                     _pct(v.at_reference), _pct(v.clock), _r(v.clock_r), _pct(v.slow), _pct(v.throttled)]
                    for v in report.variants]
    out = [
        ("A/A: identical code in other processes", ["workload", "kind", "verdict (GPU statistic)",
                                                    "verdict (clock-normalized)", "verdict (per-process median)"],
         aa_rows),
        ("Planted slowdowns (nominal, exact extra work)", ["workload", "planted", "verdict (GPU statistic)",
                                                           "verdict (clock-normalized)", "detected"], ladder_rows),
        ("Between-process spread (max/min − 1 over all processes)",
         ["workload", "medians", "GPU statistic", "clock-normalized", "SM clock", "r(statistic, 1/clock)"],
         spread_rows),
    ]
    if variant_rows:
        out.append(("Timer variants, in every process", ["workload", "variant", "median µs", "spread of statistic",
                                                         "clock-normalized", "SM clock", "r(statistic, 1/clock)",
                                                         "slow samples", "throttled samples"], variant_rows))
    if report.kernels:
        out.append(("Kernels each process ran (torch.profiler)", ["workload", "processes × kernels"],
                    [[family, text] for family, text in report.kernels]))
    if report.profiled:
        out.append(("Kernel times: torch.profiler (CUPTI) against CUDA events",
                    ["workload", "per process: kernels (CUPTI), then the harness's event interval"],
                    [[family, text] for family, text in report.profiled]))
    return out


def print_report(report: Report, console: Console) -> None:
    console.print(f"{report.device}: {report.rounds} rounds ({2 * report.rounds} processes) in {report.wall_s:.0f} s, "
                  f"timer {report.timer!r}" + (f", env {report.env}" if report.env else ""))
    for title, header, rows in tables(report):
        table = Table(*header, title=title)
        for row in rows:
            table.add_row(*[cell.replace("**", "") for cell in row])
        console.print(table)


def markdown(report: Report) -> str:
    env = "".join(f" `{k}={v}`" for k, v in report.env)
    lines = [f"# GPU A/B check on {report.device}", "",
             f"`python -m bench.gpu_ab_check`: {report.rounds} rounds ({2 * report.rounds} fresh processes, "
             f"sides alternating) in {report.wall_s:.0f} s; timer `{report.timer}`{env}. "
             f"min_effect {abtest.DEFAULT_MIN_EFFECT:.0%}, alpha {abtest.DEFAULT_ALPHA}.", ""]
    for title, header, rows in tables(report):
        lines += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        lines.append("")
    return "\n".join(lines)


def report_json(report: Report) -> dict[str, Any]:
    """The report as plain data (``--json``): every verdict with its interval, every spread."""
    def verdict(v: abtest.ABVerdict | None) -> dict[str, Any] | None:
        return None if v is None else {"direction": v.direction, "change_pct": v.change_pct, "ci_low": v.ci_low,
                                       "ci_high": v.ci_high, "rounds": v.rounds}
    return {
        "device": report.device, "rounds": report.rounds, "wall_s": report.wall_s, "timer": report.timer,
        "env": report.env,
        "aa": [{"workload": label, "kind": kind, "gpu": verdict(g), "clock_normalized": verdict(r),
                "median": verdict(m)} for label, kind, g, r, m in report.aa],
        "ladder": [{"workload": family, "planted": planted, "exact": exact, "gpu": verdict(g),
                    "clock_normalized": verdict(r)} for family, planted, exact, g, r in report.ladder],
        "spreads": [asdict(s) for s in report.spreads],
        "variants": [asdict(v) for v in report.variants],
        "kernels": report.kernels,
    }


def _env_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_ab_check", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--budget-s", type=float, default=240.0, help="no round is started past this")
    parser.add_argument("--workloads", default="all", help="comma-separated words of workload names, or 'all'")
    parser.add_argument("--timer", default="harness", choices=TIMERS, help="the timer variant every workload gets")
    parser.add_argument("--experiments", default="gemm", help="comma-separated: gemm, flush, none")
    parser.add_argument("--env", type=_env_pair, action="append", default=[], metavar="KEY=VALUE",
                        help="set in every measuring process")
    parser.add_argument("--markdown", type=Path, default=ROOT / "docs" / "gpu-ab-check.md")
    parser.add_argument("--json", type=Path, default=None, help="the report as JSON too")
    parser.add_argument("--out-dir", type=Path, default=ROOT / ".cache" / "gpu-ab-check")
    parser.add_argument("--fake", action="store_true", help="a modelled device on the CPU (tests the control flow)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    families = select_families(args.workloads)
    experiments = [e.strip() for e in args.experiments.split(",") if e.strip() and e.strip() != "none"]
    if unknown := set(experiments) - {"gemm", "flush"}:
        parser.error(f"unknown experiments: {', '.join(sorted(unknown))}")
    if args.child is not None:
        device: Device = FakeDevice(seed=args.child) if args.fake else CudaDevice()
        args.child_out.write_text(json.dumps(measure_process(device, args.child, families, args.timer, experiments)))
        return 0

    console = Console(width=180)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    processes: list[dict[str, Any]] = []
    last_round = 0.0
    for index in range(args.rounds):
        elapsed = time.monotonic() - started
        if index >= abtest.MIN_ROUNDS and elapsed + last_round > args.budget_s:
            console.print(f"stopping after {index} rounds: one more would pass the {args.budget_s:.0f} s budget")
            break
        round_start = time.monotonic()
        for side in (("A", "B") if index % 2 == 0 else ("B", "A")):
            console.print(f"round {index + 1}/{args.rounds} · side {side}: {len(workloads(families))} workloads, "
                          f"experiments {experiments or 'none'} ({time.monotonic() - started:.0f} s)", highlight=False)
            try:
                processes.append(run_child(2 * index + (side == "B"), side, args, timeout_s=max(120.0, args.budget_s)))
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                console.print(f"[red]round {index + 1} side {side} failed[/]: {exc}", markup=True)
                processes = [p for p in processes if p.get("round") != index]
                break
        else:
            last_round = time.monotonic() - round_start
            continue
        break
    if len({p["round"] for p in processes}) < abtest.MIN_ROUNDS:
        console.print(f"[red]only {len(processes) // 2} complete rounds: no verdicts[/]", markup=True)
        return 1
    report = analyse(processes, time.monotonic() - started, families, args.timer, args.env)
    print_report(report, console)
    args.markdown.parent.mkdir(parents=True, exist_ok=True)
    args.markdown.write_text(markdown(report))
    if args.json:
        args.json.write_text(json.dumps(report_json(report), indent=1))
    console.print(f"written {args.markdown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
