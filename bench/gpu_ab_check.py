"""A/B verdicts on a real GPU: false alarms on identical code, planted slowdowns, and the slow mode.

    python -m bench.gpu_ab_check [--rounds R] [--budget-s S] [--markdown FILE] [--out-dir DIR] [--fake]

Every round starts two fresh processes, side A and side B (order alternating), each measuring
the same set of workloads with roofwatch's harness timer (``roofwatch.timing.GpuTimer``: CUDA
events, a 2 × L2 flush before each sample, adaptive sample count). Between-process noise is
what decides an A/B, so nothing is compared inside one process. From the rounds it reports:

1. **A/A**: every workload of side A against the same workload of side B (identical code):
   the product's verdict (``roofwatch.service.analysis.abtest``, its GPU statistic), and the
   same rule on the per-process median, counting false regressions.
2. **Planted slowdowns of exact size**: a copy that moves 2 %, 5 %, 10 % more bytes, an FMA
   loop with 2 %, 5 %, 10 % more iterations, a bf16 matmul with 2 %, 5 %, 10 % larger K —
   side A's base against side B's variant — detection per size.
3. **Between-process spread** of each workload's per-process median and fast-mode value.
4. **The slow mode's cause**, on the bimodal fused RMSNorm (8192 × 8192 bf16) and a 256 MiB
   copy: the flush as the harness does it (zero 2 × L2), as nvbench does (exactly L2), as
   ``do_bench`` does (zero 256 MiB), a read-only flush, no flush, rotating input buffers with
   no flush, and 10-call CUDA-graph batches; per variant, the spread of per-process medians and
   the share of slow samples; and in the first processes, kernel times from ``torch.profiler``
   (CUPTI) against CUDA events.

Rounds are added up to ``--rounds`` while the time budget allows one more. ``--fake`` runs the
same control flow on the CPU with a modelled device (a timeline advanced by each workload's
modelled time, some processes in a slow state), which is how CI tests it. Needs only torch,
triton, numpy, scipy and rich on the GPU host.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from roofwatch.service.analysis import abtest
from roofwatch.timing import GpuTimer, GraphPolicy, StoppingRule, WarmUp

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20
PLANTED = (0.02, 0.05, 0.10)
SLOW_FACTOR = 1.15  # a sample this much above the process's fast mode counts as slow
RULE = StoppingRule(max_samples=400, max_time_s=0.25)
WARMUP = WarmUp(time_s=0.05, max_calls=200)
PROFILED_PROCESSES = 4


@dataclass(frozen=True)
class Workload:
    """One measured callable; ``planted`` is the exact relative extra work of a variant."""

    family: str
    kind: str  # "memory" or "compute"
    planted: float = 0.0

    @property
    def label(self) -> str:
        return self.family if not self.planted else f"{self.family} +{self.planted:.0%}"


def workloads() -> list[Workload]:
    out: list[Workload] = []
    for family, kind in (("copy 64 MiB", "memory"), ("copy 256 MiB", "memory"), ("copy 1 GiB", "memory"),
                         ("fma loop", "compute"), ("matmul bf16 4096", "compute")):
        out += [Workload(family, kind, planted) for planted in (0.0, *PLANTED)]
    out += [Workload("rmsnorm fwd 8192x8192", "memory"), Workload("rmsnorm fwd 4096x16384", "memory")]
    return out


EXPERIMENTS = ("flush 2xL2 zero (harness)", "harness without the stream hold", "flush L2 memset (nvbench)", "flush 256 MiB zero (do_bench)",
               "flush 2xL2 read", "no flush", "rotating inputs, no flush", "graph x10")
EXPERIMENT_FAMILIES = ("rmsnorm fwd 8192x8192", "copy 256 MiB")


# --- the device: real (torch + triton) or modelled -----------------------------------------


class Device:
    """What a child process measures with: callables per workload, backends per flush kind."""

    name = ""

    def callable_for(self, workload: Workload) -> Callable[[], object]: ...

    def rotating(self, family: str) -> Callable[[], object]: ...

    def timer(self, flush: str, graphs: GraphPolicy = GraphPolicy(), hold: bool = True) -> GpuTimer: ...

    def profiled_kernel_us(self, family: str, calls: int) -> list[float] | str: ...


class CudaDevice(Device):
    def __init__(self) -> None:
        import torch

        from roofwatch.timing import TorchCudaBackend

        self.torch = torch
        self.backend = TorchCudaBackend()
        self.name = self.backend.name
        self.l2 = self.backend.l2_bytes
        self._buffers: dict[str, Any] = {}
        torch.manual_seed(0)

    def _copy(self, nbytes: int) -> Callable[[], object]:
        torch = self.torch
        n = nbytes // 2
        src = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)

    def _fma(self, iterations: int) -> Callable[[], object]:
        from bench.gpu_fma import fma_loop

        torch = self.torch
        x = torch.randn(132 * 4 * 1024, device="cuda", dtype=torch.float32)
        out = torch.empty_like(x)
        return lambda: fma_loop(x, out, iterations)

    def _matmul(self, k: int) -> Callable[[], object]:
        torch = self.torch
        a = torch.randn(4096, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, 4096, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(4096, 4096, device="cuda", dtype=torch.bfloat16)
        return lambda: torch.matmul(a, b, out=out)

    def _rmsnorm(self, rows: int, cols: int, copies: int = 1) -> list[Callable[[], object]]:
        import kernels.rmsnorm as k

        torch = self.torch
        w = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
        fns = []
        for _ in range(copies):
            x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
            fns.append(lambda x=x: k.rmsnorm_forward(x, w, 1e-6))
        return fns

    def callable_for(self, workload: Workload) -> Callable[[], object]:
        family, grow = workload.family, 1 + workload.planted
        if family.startswith("copy"):
            size = {"copy 64 MiB": 64, "copy 256 MiB": 256, "copy 1 GiB": 1024}[family] * MIB
            return self._copy(int(size * grow) // 16 * 16)
        if family == "fma loop":
            return self._fma(round(4096 * grow))
        if family == "matmul bf16 4096":
            return self._matmul(round(4096 * grow) // 64 * 64)
        rows, cols = (8192, 8192) if "8192x8192" in family else (4096, 16384)
        return self._rmsnorm(rows, cols)[0]

    def rotating(self, family: str) -> Callable[[], object]:
        per_call = 2 * 8192 * 8192 * 2 if family.startswith("rmsnorm") else 2 * 256 * MIB
        copies = max(2, math.ceil(3 * self.l2 / per_call) + 1)
        if family.startswith("rmsnorm"):
            fns = self._rmsnorm(8192, 8192, copies)
        else:
            fns = [self._copy(256 * MIB) for _ in range(copies)]
        state = {"i": 0}

        def call() -> object:
            state["i"] = (state["i"] + 1) % len(fns)
            return fns[state["i"]]()
        return call

    def timer(self, flush: str, graphs: GraphPolicy = GraphPolicy(), hold: bool = True) -> GpuTimer:
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
        return GpuTimer(use, None, rule=RULE, warmup=WARMUP, graphs=graphs, flush_l2=flush != "none",
                        hold_stream=hold)

    def profiled_kernel_us(self, family: str, calls: int) -> list[float] | str:
        torch = self.torch
        fn = self.callable_for(Workload(family, "memory"))
        try:
            from torch.profiler import ProfilerActivity, profile

            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(calls):
                    self.backend.flush_l2()
                    fn()
                torch.cuda.synchronize()
            durations = [float(e.time_range.end - e.time_range.start) for e in prof.events()
                         if str(e.device_type).endswith("CUDA") and "Fill" not in e.name]
            return [d for d in durations if d > 0] or "no kernel events recorded"
        except Exception as exc:  # the profiler's API and CUPTI vary by version and host
            return f"profiler unavailable: {type(exc).__name__}: {exc}"


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

    Memory workloads take bytes / 3 TB/s, compute ones FLOP / 500 TFLOP/s, times the exact
    planted growth; every sample gets 0.3 % normal jitter. The fused RMSNorm has the real
    device's pathology: each process draws a share of slow samples (0–60 %), 35 % slower.
    """

    name = "modelled GPU (fake)"
    l2_bytes = 50 * MIB

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.now = 0.0
        self.slow_share = float(self.rng.uniform(0.0, 0.6))

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

    def _advance(self, seconds: float, bimodal: bool = False) -> Callable[[], object]:
        def call() -> object:
            slow = bimodal and self.rng.random() < self.slow_share
            self.now += seconds * (1.35 if slow else 1.0) * (1 + 0.003 * float(self.rng.standard_normal()))
            return None
        return call

    def callable_for(self, workload: Workload) -> Callable[[], object]:
        grow, family = 1 + workload.planted, workload.family
        if family.startswith("copy"):
            size = {"copy 64 MiB": 64, "copy 256 MiB": 256, "copy 1 GiB": 1024}[family] * MIB
            return self._advance(2 * size * grow / 3e12)
        if family == "fma loop":
            return self._advance(2 * 132 * 4 * 1024 * 4096 * grow / 500e12 + 5e-6)
        if family == "matmul bf16 4096":
            return self._advance(2 * 4096 ** 3 * grow / 500e12)
        return self._advance(2 * 8192 * 8192 * 2 / 3e12, bimodal="8192x8192" in family)

    def rotating(self, family: str) -> Callable[[], object]:
        return self.callable_for(Workload(family, "memory"))

    def timer(self, flush: str, graphs: GraphPolicy = GraphPolicy(), hold: bool = True) -> GpuTimer:
        return GpuTimer(self, None, rule=RULE, warmup=WARMUP, graphs=graphs, flush_l2=flush != "none",
                        hold_stream=hold, clock=lambda: self.now)

    def profiled_kernel_us(self, family: str, calls: int) -> list[float] | str:
        return "no profiler on the modelled device"


# --- one process ---------------------------------------------------------------------------


def summary(samples: Sequence[float], timer: str) -> dict[str, Any]:
    """What the parent needs of one measurement (seconds), with a bounded sample of the raw times."""
    s = np.sort(np.asarray(samples, dtype=float))
    median = float(np.median(s))
    fast = float(np.percentile(s, abtest.FAST_MODE_QUANTILE))
    keep = s if len(s) <= 400 else np.asarray(samples)[:: math.ceil(len(s) / 400)]
    return {"n": len(s), "median": median, "p10": fast, "p90": float(np.percentile(s, 90)), "min": float(s[0]),
            "value": abtest.process_value(list(samples), median, timer),
            "slow_share": float(np.mean(s > SLOW_FACTOR * fast)), "timer": timer,
            "samples": [float(x) for x in keep]}


def _experiment(device: Device, family: str, name: str, fn: Callable[[], object]) -> dict[str, Any]:
    if name.startswith("flush"):
        found = device.timer(name.removeprefix("flush ").split(" (")[0]).measure(fn)
    elif name == "harness without the stream hold":
        found = device.timer("2xL2 zero", hold=False).measure(fn)
    elif name == "no flush":
        found = device.timer("none").measure(fn)
    elif name.startswith("rotating"):
        found = device.timer("none").measure(device.rotating(family))
    else:
        found = device.timer("2xL2 zero", GraphPolicy(threshold_s=1.0, target_s=1.0, max_calls=10)).measure(fn)
    return summary(found.samples, found.timer)


def measure_process(device: Device, index: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    timer = device.timer("2xL2 zero")
    for workload in workloads():
        found = timer.measure(device.callable_for(workload))
        results[workload.label] = summary(found.samples, found.timer)
    experiments: dict[str, Any] = {}
    for family in EXPERIMENT_FAMILIES:
        fn = device.callable_for(Workload(family, "memory"))
        for name in EXPERIMENTS:
            try:
                experiments[f"{family} | {name}"] = _experiment(device, family, name, fn)
            except Exception as exc:  # one variant failing on some host must not cost the others
                experiments[f"{family} | {name}"] = {"error": f"{type(exc).__name__}: {exc}"}
    profiled: dict[str, Any] = {}
    if index < PROFILED_PROCESSES:
        for family in EXPERIMENT_FAMILIES:
            profiled[family] = device.profiled_kernel_us(family, 100)
    return {"device": device.name, "results": results, "experiments": experiments, "profiled": profiled}


# --- the parent: rounds, verdicts, tables --------------------------------------------------


def run_child(index: int, side: str, fake: bool, out_dir: Path, timeout_s: float) -> dict[str, Any]:
    path = out_dir / f"process-{index:02d}-{side}.json"
    argv = [sys.executable, "-m", "bench.gpu_ab_check", "--child", str(index), "--child-out", str(path)]
    if fake:
        argv.append("--fake")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"process {index} ({side}) failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    data: dict[str, Any] = json.loads(path.read_text())
    data["side"], data["round"] = side, index // 2
    return data


def spread(values: Sequence[float]) -> float:
    """max / min − 1 of positive values (the figure of merit: identical code, other processes)."""
    return max(values) / min(values) - 1 if values and min(values) > 0 else math.nan


@dataclass
class Report:
    device: str
    rounds: int
    wall_s: float
    aa: list[tuple[str, str, abtest.ABVerdict, abtest.ABVerdict]]  # label, kind, GPU statistic, median
    ladder: list[tuple[str, float, abtest.ABVerdict]]
    spreads: list[tuple[str, float, float]]  # label, spread of medians, of fast-mode values
    experiments: list[tuple[str, float, float, float, float]]  # name, median µs, spread med, spread p10, slow
    profiled: list[tuple[str, str]]


def analyse(processes: list[dict[str, Any]], wall_s: float) -> Report:
    a = [p for p in processes if p["side"] == "A"]
    b = [p for p in processes if p["side"] == "B"]
    rounds = min(len(a), len(b))
    a, b = a[:rounds], b[:rounds]
    kinds = {w.label: w.kind for w in workloads()}
    labels = [w.label for w in workloads()]

    def values(side: list[dict[str, Any]], label: str, field: str = "value") -> list[float]:
        return [float(p["results"][label][field]) for p in side]

    gpu = abtest.verdicts([abtest.PairedRounds(values(a, label), values(b, label)) for label in labels])
    by_median = abtest.verdicts([abtest.PairedRounds(values(a, label, "median"), values(b, label, "median"))
                                 for label in labels])
    aa = [(label, kinds[label], g, m) for label, g, m in zip(labels, gpu, by_median)]
    planted = [w for w in workloads() if w.planted]
    ladder_verdicts = abtest.verdicts([abtest.PairedRounds(values(a, w.family), values(b, w.label)) for w in planted])
    ladder = [(w.family, w.planted, v) for w, v in zip(planted, ladder_verdicts)]
    spreads = [(label, spread(values(processes, label, "median")), spread(values(processes, label, "p10")))
               for label in labels]
    experiments = []
    for key in processes[0]["experiments"]:
        rows = [p["experiments"][key] for p in processes if "error" not in p["experiments"].get(key, {"error": ""})]
        if not rows:
            errors = {p["experiments"][key].get("error", "") for p in processes}
            experiments.append((f"{key} (failed: {'; '.join(sorted(errors))[:200]})", math.nan, math.nan,
                                math.nan, math.nan))
            continue
        experiments.append((key, 1e6 * statistics.median(r["median"] for r in rows),
                            spread([r["median"] for r in rows]), spread([r["p10"] for r in rows]),
                            statistics.mean(r["slow_share"] for r in rows)))
    profiled = []
    for p in processes:
        for family, found in p.get("profiled", {}).items():
            events = p["experiments"].get(f"{family} | flush 2xL2 zero (harness)", {})
            if isinstance(found, list) and found and "median" in events:
                profiled.append((family, f"profiler median {statistics.median(found):.1f} µs, p90 "
                                 f"{np.percentile(found, 90):.1f} µs; events median {1e6 * events['median']:.1f} µs, "
                                 f"p90 {1e6 * events['p90']:.1f} µs"))
            else:
                profiled.append((family, str(found)))
    return Report(processes[0]["device"], rounds, wall_s, aa, ladder, spreads, experiments, profiled)


def _fmt_verdict(v: abtest.ABVerdict) -> str:
    if v.rounds < abtest.MIN_ROUNDS:
        return f"{v.direction}"
    return f"{v.direction} {v.change_pct:+.1f}% [{v.ci_low:+.1f}, {v.ci_high:+.1f}]"


def tables(report: Report) -> list[tuple[str, list[str], list[list[str]]]]:
    aa_rows = [[label, kind, _fmt_verdict(g), _fmt_verdict(m)] for label, kind, g, m in report.aa]
    false_gpu = sum(g.direction in ("regression", "improvement") for _, _, g, _ in report.aa)
    false_med = sum(m.direction in ("regression", "improvement") for _, _, _, m in report.aa)
    aa_rows.append(["**false changes**", "", f"{false_gpu} of {len(report.aa)}", f"{false_med} of {len(report.aa)}"])
    ladder_rows = [[family, f"+{planted:.0%}", _fmt_verdict(v), "yes" if v.direction == "regression" else "no"]
                   for family, planted, v in report.ladder]
    for size in PLANTED:
        hits = [v for _, planted, v in report.ladder if planted == size]
        ladder_rows.append([f"**detected at +{size:.0%}**", "", f"{sum(v.direction == 'regression' for v in hits)} "
                            f"of {len(hits)}", ""])
    spread_rows = [[label, f"{100 * m:.1f}%", f"{100 * f:.1f}%"] for label, m, f in report.spreads]
    exp_rows = [[name, f"{med:.1f}", f"{100 * sm:.1f}%", f"{100 * sf:.1f}%", f"{100 * slow:.0f}%"]
                for name, med, sm, sf, slow in report.experiments]
    prof_rows = [[family, text] for family, text in report.profiled]
    return [
        ("A/A: identical code in other processes", ["workload", "kind", "verdict (GPU statistic)",
                                                    "verdict (per-process median)"], aa_rows),
        ("Planted slowdowns of exact size", ["workload", "planted", "verdict", "detected"], ladder_rows),
        ("Between-process spread (max/min − 1 over all processes)", ["workload", "medians", "fast-mode values"],
         spread_rows),
        ("The slow mode: flush, buffers, graphs", ["workload | variant", "median µs", "spread of medians",
                                                   "spread of fast mode", "slow samples"], exp_rows),
        ("Kernel times: torch.profiler (CUPTI) against CUDA events", ["workload", "per process"], prof_rows),
    ]


def print_report(report: Report, console: Console) -> None:
    console.print(f"{report.device}: {report.rounds} rounds ({2 * report.rounds} processes) in {report.wall_s:.0f} s")
    for title, header, rows in tables(report):
        table = Table(*header, title=title)
        for row in rows:
            table.add_row(*[cell.replace("**", "") for cell in row])
        console.print(table)


def markdown(report: Report) -> str:
    lines = [f"# GPU A/B check on {report.device}", "",
             f"`python -m bench.gpu_ab_check`: {report.rounds} rounds ({2 * report.rounds} fresh processes, "
             f"sides alternating) in {report.wall_s:.0f} s. min_effect {abtest.DEFAULT_MIN_EFFECT:.0%}, "
             f"alpha {abtest.DEFAULT_ALPHA}.", ""]
    for title, header, rows in tables(report):
        lines += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_ab_check", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--budget-s", type=float, default=420.0, help="no round is started past this")
    parser.add_argument("--markdown", type=Path, default=ROOT / "docs" / "gpu-ab-check.md")
    parser.add_argument("--out-dir", type=Path, default=ROOT / ".cache" / "gpu-ab-check")
    parser.add_argument("--fake", action="store_true", help="a modelled device on the CPU (tests the control flow)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        device: Device = FakeDevice(seed=args.child) if args.fake else CudaDevice()
        args.child_out.write_text(json.dumps(measure_process(device, args.child)))
        return 0

    console = Console(width=160)
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
            console.print(f"round {index + 1}/{args.rounds} · side {side}: measuring {len(workloads())} workloads "
                          f"and {len(EXPERIMENTS) * len(EXPERIMENT_FAMILIES)} flush variants", highlight=False)
            try:
                processes.append(run_child(2 * index + (side == "B"), side, args.fake, args.out_dir,
                                           timeout_s=max(120.0, args.budget_s)))
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                console.print(f"[red]round {index + 1} side {side} failed[/]: {exc}", markup=True)
                processes = [p for p in processes if p.get("round") != index]
                break
        last_round = time.monotonic() - round_start
    report = analyse(processes, time.monotonic() - started)
    print_report(report, console)
    args.markdown.parent.mkdir(parents=True, exist_ok=True)
    args.markdown.write_text(markdown(report))
    console.print(f"written {args.markdown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
