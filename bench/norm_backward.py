"""RMSNorm and LayerNorm backward against the measured copy bandwidth, before and after, on a GPU.

    python -m bench.norm_backward [--before DIR] [--sweep] [--markdown FILE] [--json FILE]
        [--shapes 16384x4096,8192x8192,4096x16384] [--fake]

For each backward (bf16, the benchmark suite's shapes) it times, with roofwatch's harness timer
(``GpuTimer``: CUDA events, L2 flush, stream hold), the whole ``torch.autograd.grad`` call the
benchmark suite times (``suites/benchmarks/test_norms.py``) and the bare ``*_backward``
function, and reports each as a share of the copy bandwidth measured the way ``roofwatch
calibrate`` does (the best of a 1 GiB copy, bytes read plus written): compulsory bytes
(``*_backward_bytes``) over the median time. Beside the numbers:

- ``--before DIR``: the same for the kernels in ``DIR`` (``rmsnorm.py`` and ``layernorm.py`` of an
  earlier commit, e.g. ``git show REV:kernels/rmsnorm.py``), imported under other names;
- per kernel, what ``torch.profiler`` (CUPTI) saw of one call: each kernel's median time, so
  the backward kernel is told apart from the partial sum and the casts;
- the compiled kernels' registers, spills and shared memory, as Triton loaded them;
- ``--sweep``: other launches of the new backward (``BackwardLaunch``: pipeline depth, programs
  per SM, block), each checked against the default launch's ``dx`` before it is timed.

``--fake`` runs the control flow on the CPU through the Triton interpreter at small shapes with
the host timer: the numbers mean nothing there, the code paths are the GPU's.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
SHAPES = ((16_384, 4096), (8192, 8192), (4096, 16_384))
FAKE_SHAPES = ((8, 256), (2, 8200))  # a fused and a streamed row, seconds in the interpreter
COPY_BYTES = 1 << 30


@dataclass(frozen=True)
class Row:
    norm: str  # rmsnorm | layernorm
    kernels: str  # before | after | a sweep launch
    shape: str
    call: str  # "autograd" (the benchmark's call) or "backward" (the function alone)
    median_us: float
    gbps: float
    of_copy: float
    profiled: str = ""
    error: str = ""


def load_kernels(directory: Path, tag: str) -> dict[str, ModuleType]:
    """``rmsnorm`` and ``layernorm`` modules from ``directory``, importable beside ``kernels``."""
    modules = {}
    for name in ("rmsnorm", "layernorm"):
        path = directory / f"{name}.py"
        spec = importlib.util.spec_from_file_location(f"_{tag}_{name}", path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # Triton reads the source back through the module
        spec.loader.exec_module(module)
        modules[name] = module
    return modules


class Bench:
    """Inputs, timer and copy roof on one device (CUDA, or the CPU under the interpreter)."""

    def __init__(self, fake: bool) -> None:
        from roofwatch.timing import GpuTimer, HostTimer, StoppingRule, WarmUp

        self.torch = torch
        self.device = "cpu" if fake else "cuda"
        if fake:
            self.timer: Any = HostTimer(rule=StoppingRule(min_samples=3, max_samples=5, max_time_s=0.5),
                                        warmup=WarmUp(time_s=0.0, max_calls=1))
        else:
            self.timer = GpuTimer.for_device(rule=StoppingRule(max_samples=300, max_time_s=0.4),
                                             warmup=WarmUp(time_s=0.05, max_calls=100))
        nbytes = (1 << 20) if fake else COPY_BYTES
        src = torch.randn(nbytes // 4, device=self.device)
        dst = torch.empty_like(src)
        best = min(self.timer.measure(lambda: dst.copy_(src)).samples)
        self.copy_gbps = 2 * nbytes / best / 1e9

    def randn(self, shape: tuple[int, ...], seed: int) -> Any:
        torch = self.torch
        generator = torch.Generator(device=self.device).manual_seed(seed)
        return torch.randn(shape, generator=generator, device=self.device, dtype=torch.bfloat16)

    def time(self, fn: Callable[[], object]) -> float:
        return statistics.median(self.timer.measure(fn).samples)

    def profile(self, fn: Callable[[], object]) -> str:
        """Median time of each kernel one call launches (CUPTI), or why there is none."""
        if self.device == "cpu":
            return "no profiler under the interpreter"
        torch = self.torch
        try:
            from torch.profiler import ProfilerActivity, profile

            fn()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    fn()
                torch.cuda.synchronize()
            by_name: dict[str, list[float]] = {}
            for event in prof.events():
                if str(event.device_type).endswith("CUDA"):
                    by_name.setdefault(event.name, []).append(float(event.time_range.end - event.time_range.start))
            parts = sorted(((statistics.median(times), name) for name, times in by_name.items()), reverse=True)
            return "; ".join(f"{name[:60]} {us:.1f} µs" for us, name in parts)
        except Exception as exc:  # CUPTI differs by host and version
            return f"profiler unavailable: {type(exc).__name__}: {exc}"


def _calls(bench: Bench, module: ModuleType, norm: str, shape: tuple[int, int],
           launch: Any = None) -> tuple[Callable[[], object], Callable[[], object], Callable[[], Any]]:
    """``(autograd call, backward call, dx of the backward)`` for one norm and shape."""
    torch = bench.torch
    rows, cols = shape
    x, g = bench.randn(shape, 0), bench.randn(shape, 99)
    w = bench.randn((cols,), 1)
    extra = {} if launch is None else {"launch": launch}
    if norm == "rmsnorm":
        _, rstd = module.rmsnorm_forward(x, w, 1e-6)

        def backward() -> object:
            return module.rmsnorm_backward(g, x, w, rstd, **extra)
        inputs: tuple[Any, ...] = (x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_())
        y = module.rmsnorm(*inputs, 1e-6)
    else:
        b = bench.randn((cols,), 2)
        _, mean, rstd = module.layernorm_forward(x, w, b, 1e-5)

        def backward() -> object:
            return module.layernorm_backward(g, x, w, mean, rstd, **extra)
        inputs = tuple(t.detach().clone().requires_grad_() for t in (x, w, b))
        y = module.layernorm(*inputs, 1e-5)

    def autograd() -> object:
        return torch.autograd.grad(y, inputs, g, retain_graph=True)
    return autograd, backward, lambda: backward()[0]  # type: ignore[index]


def _bytes(module: ModuleType, norm: str, shape: tuple[int, int]) -> int:
    return int(getattr(module, f"{norm}_backward_bytes")(*shape, torch.bfloat16))


def measure(bench: Bench, modules: dict[str, ModuleType], label: str, shapes: tuple[tuple[int, int], ...],
            calls: tuple[str, ...] = ("autograd", "backward")) -> list[Row]:
    rows = []
    for norm, module in modules.items():
        for shape in shapes:
            autograd, backward, _ = _calls(bench, module, norm, shape)
            for call, fn in (("autograd", autograd), ("backward", backward)):
                if call not in calls:
                    continue
                median = bench.time(fn)
                gbps = _bytes(module, norm, shape) / median / 1e9
                rows.append(Row(norm, label, f"{shape[0]}x{shape[1]}", call, 1e6 * median, gbps,
                                gbps / bench.copy_gbps, bench.profile(fn) if call == "backward" else ""))
            bench.torch.cuda.empty_cache() if bench.device == "cuda" else None
    return rows


def sweep_launches(module: ModuleType, cols: int) -> list[Any]:
    """Launches of the new backward worth comparing with the default for rows of ``cols``."""
    default = module.backward_launch(cols, torch.bfloat16)
    options = [replace(default, stages=s) for s in (1, 2, 3) if s != default.stages]
    options += [replace(default, programs_per_sm=p) for p in (1, 2, 4) if p != default.programs_per_sm]
    if not default.fused:
        options += [replace(default, block=4096, num_warps=8), replace(default, block=4096, num_warps=16)]
    return options


def sweep(bench: Bench, modules: dict[str, ModuleType], shapes: tuple[tuple[int, int], ...],
          deadline: float) -> list[Row]:
    rows: list[Row] = []
    torch = bench.torch
    for norm, module in modules.items():
        for shape in shapes:
            _, _, reference = _calls(bench, module, norm, shape)
            expected = reference()
            for launch in sweep_launches(module, shape[1]):
                if time.monotonic() > deadline:
                    return rows
                label = (f"{'fused' if launch.fused else 'streamed'} block {launch.block} w{launch.num_warps} "
                         f"stages {launch.stages}, {launch.programs_per_sm}/SM")
                try:
                    _, backward, dx = _calls(bench, module, norm, shape, launch)
                    found = dx()
                    if not torch.equal(found, expected):
                        # Bit for bit: a launch that changes a row's summation order may differ by
                        # rounding only; the size of the difference tells that from a wrong dx.
                        worst = (found.float() - expected.float()).abs().max().item()
                        raise AssertionError(f"dx differs from the default launch's, by up to {worst:.3g}")
                    median = bench.time(backward)
                    gbps = _bytes(module, norm, shape) / median / 1e9
                    rows.append(Row(norm, label, f"{shape[0]}x{shape[1]}", "backward", 1e6 * median, gbps,
                                    gbps / bench.copy_gbps))
                except Exception as exc:  # a launch past a resource limit is a finding, not a crash
                    rows.append(Row(norm, label, f"{shape[0]}x{shape[1]}", "backward", float("nan"),
                                    float("nan"), float("nan"), error=f"{type(exc).__name__}: {str(exc)[:160]}"))
    return rows


def constexprs(kernel: Any) -> str:
    """The ``tl.constexpr`` arguments a compiled kernel was built for (``BLOCK=8192, STAGES=3``).

    They tell the compiled variants of one kernel apart; Triton's metadata holds none of them, and
    its ``num_stages`` is the kernel's, not the row loop's ``STAGES``.
    """
    src = getattr(kernel, "src", None)
    fn = getattr(src, "fn", None)
    names, declared = getattr(fn, "arg_names", None), set(getattr(fn, "constexprs", ()))
    if names is None:
        return ""
    found = {names[key[0]]: value for key, value in getattr(src, "constants", {}).items()
             if isinstance(key, tuple) and len(key) == 1 and key[0] in declared}
    return ", ".join(f"{name}={value}" for name, value in sorted(found.items()))


def compiled(modules: dict[str, dict[str, ModuleType]]) -> list[dict[str, Any]]:
    """Registers, spills and shared memory of every backward kernel Triton loaded, per module set."""
    out = []
    for label, mods in modules.items():
        for norm, module in mods.items():
            for name in dir(module):
                fn = getattr(module, name)
                if "backward" not in name or not hasattr(fn, "device_caches"):
                    continue
                try:
                    for cache in fn.device_caches.values():
                        for kernel in cache[0].values():
                            meta = kernel.metadata
                            out.append({"kernels": label, "norm": norm, "kernel": name,
                                        "constexprs": constexprs(kernel)[:120],
                                        "num_warps": getattr(meta, "num_warps", None),
                                        "num_stages": getattr(meta, "num_stages", None),
                                        "registers": getattr(kernel, "n_regs", None),
                                        "spills": getattr(kernel, "n_spills", None),
                                        "shared": getattr(meta, "shared", None)})
                except Exception as exc:  # Triton's caches are internal and change between versions
                    out.append({"kernels": label, "norm": norm, "kernel": name, "error": repr(exc)[:200]})
    return out


def markdown(device: str, copy_gbps: float, rows: list[Row], sweep_rows: list[Row],
             kernels: list[dict[str, Any]]) -> str:
    lines = [f"# Norm backward on {device}", "",
             f"Copy bandwidth (best of a {COPY_BYTES >> 30} GiB copy): {copy_gbps:,.0f} GB/s.", "",
             "| norm | kernels | shape | call | median µs | GB/s | of copy |", "|---|---|---|---|---:|---:|---:|"]
    lines += [f"| {r.norm} | {r.kernels} | {r.shape} | {r.call} | {r.median_us:,.1f} | {r.gbps:,.0f} | "
              f"{100 * r.of_copy:.0f}% |" for r in rows]
    lines += ["", "## Kernels of one backward call (torch.profiler)", "", "| norm | kernels | shape | kernels: median |",
              "|---|---|---|---|"]
    lines += [f"| {r.norm} | {r.kernels} | {r.shape} | {r.profiled} |" for r in rows if r.profiled]
    if sweep_rows:
        lines += ["", "## Other launches of the new backward", "",
                  "| norm | launch | shape | median µs | of copy | error |", "|---|---|---|---:|---:|---|"]
        # A launch rejected before timing has no time: a dash, not "nan".
        lines += [f"| {r.norm} | {r.kernels} | {r.shape} | " + ("– | – |" if r.error else
                  f"{r.median_us:,.1f} | {100 * r.of_copy:.0f}% |") + f" {r.error} |" for r in sweep_rows]
    lines += ["", "## Compiled backward kernels", "", "| kernels | norm | kernel | constexprs | warps | "
              "Triton num_stages | registers | spills | shared B |", "|---|---|---|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {k['kernels']} | {k['norm']} | {k['kernel']} | {k.get('constexprs', k.get('error', ''))} | "
              f"{k.get('num_warps')} | {k.get('num_stages')} | {k.get('registers')} | {k.get('spills')} | "
              f"{k.get('shared')} |" for k in kernels]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.norm_backward", description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a folder with an earlier rmsnorm.py and layernorm.py")
    parser.add_argument("--sweep", action="store_true", help="time other launches of the new backward too")
    parser.add_argument("--sweep-budget-s", type=float, default=60.0)
    parser.add_argument("--shapes", default=None, help="e.g. 8192x8192,4096x16384")
    parser.add_argument("--markdown", type=Path, default=ROOT / ".cache" / "norm-backward.md")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--fake", action="store_true", help="the CPU, through the Triton interpreter, small shapes")
    args = parser.parse_args(argv)
    if args.fake:
        import os

        os.environ["TRITON_INTERPRET"] = "1"
    sys.path.insert(0, str(ROOT))
    import kernels.layernorm
    import kernels.rmsnorm

    shapes: tuple[tuple[int, int], ...] = FAKE_SHAPES if args.fake else SHAPES
    if args.shapes:
        shapes = tuple((int(r), int(c)) for r, c in (s.split("x") for s in args.shapes.split(",")))
    bench = Bench(args.fake)
    device = "CPU (Triton interpreter)" if args.fake else str(bench.torch.cuda.get_device_name())
    print(f"{device}: copy {bench.copy_gbps:,.0f} GB/s", flush=True)
    after = {"rmsnorm": kernels.rmsnorm, "layernorm": kernels.layernorm}
    sets = {"after": after}
    rows: list[Row] = []
    if args.before:
        sets["before"] = load_kernels(args.before, "before")
        rows += measure(bench, sets["before"], "before", shapes)
    rows += measure(bench, after, "after", shapes)
    for row in rows:
        print(f"{row.norm:9s} {row.kernels:6s} {row.shape:11s} {row.call:8s} {row.median_us:9.1f} µs "
              f"{row.gbps:7.0f} GB/s {100 * row.of_copy:4.0f}% of copy", flush=True)
    sweep_rows = sweep(bench, after, shapes, time.monotonic() + args.sweep_budget_s) if args.sweep else []
    for row in sweep_rows:
        print(f"{row.norm:9s} {row.kernels:45s} {row.shape:11s} {row.median_us:9.1f} µs {100 * row.of_copy:4.0f}% "
              f"{row.error}", flush=True)
    kernels_seen = compiled(sets)
    args.markdown.parent.mkdir(parents=True, exist_ok=True)
    args.markdown.write_text(markdown(device, bench.copy_gbps, rows, sweep_rows, kernels_seen))
    if args.json:
        args.json.write_text(json.dumps({"device": device, "copy_gbps": bench.copy_gbps,
                                         "rows": [asdict(r) for r in rows], "sweep": [asdict(r) for r in sweep_rows],
                                         "compiled": kernels_seen}, indent=1))
    print(f"written {args.markdown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
