"""Measure this device's roofs: DRAM bandwidth and matrix-multiply FLOP/s per dtype.

Bandwidth: copy a buffer far larger than any cache (1 GiB on a GPU, 64 MiB on a CPU) into
another; bytes moved = bytes read + bytes written = 2 × the buffer. FLOP/s: ``torch.matmul``
of square random matrices (8192² on a GPU, a few hundred on a CPU), ``2·n³`` FLOP per call;
``fp32`` with TF32 off, ``tf32`` with it on, ``fp16``, ``bf16``, and ``fp8`` (e4m3 through
``torch._scaled_mm``) where the GPU has fp8 matrix units (compute capability 8.9+). Inputs are
random, never zeros. Each figure is the best sample of an adaptive ``roofwatch.timing`` run
(``GpuTimer`` without L2 flush or graphs, the buffers dwarf the cache and calls last
milliseconds; ``HostTimer`` on a CPU, which is then the device): the roofs must be the highest
rates reachable, so that an honest kernel never lands above them.

``python -m roofwatch.workers.calibrate [--gpu N]`` prints the calibration as JSON; a worker runs it
that way (``calibrated``) so that its own long-lived process never holds a CUDA context, and
caches the result under its data dir by device fingerprint, so a restart does not measure again.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from roofwatch.common.envelope import DeviceInfo
from roofwatch.common.errors import CalibrationError
from roofwatch.roofline import Peaks
from roofwatch.timing import GpuTimer, GraphPolicy, HostTimer, StoppingRule, Timer, WarmUp
from roofwatch.workers.cache_sizes import cpu_caches, gpu_caches

log = logging.getLogger(__name__)

MATMUL_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")
CALIBRATION_TIMEOUT_S = 900.0
# A cache level's roof is a copy whose two buffers fill half of it (so the pair stays resident),
# each buffer at most this large: enough calls per sample on a 480 MiB L3, seconds in all.
MAX_CACHE_COPY_BYTES = 64 << 20
# The DRAM copy must not fit the largest cache (CPUs now carry L3s of hundreds of MiB), nor eat the host.
MAX_DRAM_COPY_BYTES = 1 << 30

Progress = Callable[[str], None]  # called with the name of each measurement before it starts


@dataclass(frozen=True)
class CalibrationPlan:
    """What to measure: copy buffer size (bytes, each of two), matmul size per dtype, stopping rule."""

    copy_bytes: int  # a multiple of 4
    matmul_n: dict[str, int]
    rule: StoppingRule
    warmup: WarmUp
    # Measure a roof per cache level, and grow the DRAM copy past twice the largest cache.
    caches: bool = False
    max_copy_bytes: int = MAX_DRAM_COPY_BYTES


GPU_PLAN = CalibrationPlan(
    copy_bytes=1 << 30,
    # 8192² is 1.1 TFLOP per call: milliseconds even at fp8 rates, enough tiles for every SM.
    matmul_n={dtype: 8192 for dtype in MATMUL_DTYPES},
    rule=StoppingRule(min_samples=10, max_samples=200, max_time_s=2.0),
    warmup=WarmUp(time_s=0.25, max_calls=200),
    caches=True,
)
# Sized for a quick start of a CPU worker (a few seconds): fp16 matmul has no fast CPU path
# in most builds, hence its small size.
CPU_PLAN = CalibrationPlan(
    copy_bytes=64 << 20,
    matmul_n={"fp32": 512, "bf16": 256, "fp16": 128},
    rule=StoppingRule(min_samples=5, max_samples=200, max_time_s=0.5),
    warmup=WarmUp(time_s=0.02, max_calls=5),
    caches=True,
)


@dataclass(frozen=True)
class Calibration:
    """Measured peaks of one device: ``bandwidth`` in bytes/s, ``flops`` in FLOP/s by dtype.

    ``sizes`` records what was measured (``copy_bytes``, ``matmul_<dtype>`` = n); ``details``
    per measurement the best and median seconds per call, the sample count and whether the
    median converged; ``skipped`` names the dtypes this device could not run, and the cache
    levels whose copy was no faster than DRAM's, and why.
    ``caches`` holds the cache-level roofs: ``{"L2": {"capacity": bytes, "bandwidth": bytes/s}}``.
    """

    device: str
    bandwidth: float
    flops: dict[str, float]
    sizes: dict[str, int]
    timer: str
    details: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    caches: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Calibration:
        try:
            data = json.loads(text)
            calibration = cls(**data)
        except (json.JSONDecodeError, TypeError) as exc:
            raise CalibrationError(f"not a calibration: {exc}") from exc
        if not (_positive(calibration.bandwidth) and calibration.flops
                and all(_positive(v) for v in calibration.flops.values())):
            raise CalibrationError("calibration without positive finite peaks")
        return calibration


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


class _Unsupported(Exception):
    pass


def calibrate(device: Any = None, plan: CalibrationPlan | None = None, progress: Progress | None = None) -> Calibration:
    """Measure ``device`` (a torch device; default: the first GPU, else the CPU).

    ``progress`` hears the name of each measurement as it starts (for a progress bar).
    """
    import torch

    dev = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if dev.type == "cuda":
        if not torch.cuda.is_available() or (dev.index or 0) >= torch.cuda.device_count():
            raise CalibrationError(f"no CUDA device {dev}")
        dev = torch.device("cuda", dev.index or 0)
    on_gpu = dev.type == "cuda"
    plan = plan or (GPU_PLAN if on_gpu else CPU_PLAN)
    started = time.perf_counter()
    with _on(dev):
        timer: Timer = (
            GpuTimer.for_device(dev, rule=plan.rule, warmup=plan.warmup, flush_l2=False,
                                graphs=GraphPolicy(enabled=False))
            if on_gpu else HostTimer(rule=plan.rule, warmup=plan.warmup)
        )
        try:
            return _measure(torch, dev, plan, timer, started, progress or (lambda _: None))
        finally:
            timer.close()


@contextmanager
def _on(dev: Any) -> Iterator[None]:
    """Make ``dev`` the current CUDA device (torch's events and streams follow it)."""
    import torch

    if dev.type != "cuda":
        yield
        return
    with torch.cuda.device(dev):
        yield


def measured_steps(dev: Any, plan: CalibrationPlan) -> list[str]:
    """The names ``progress`` will hear, in order: for a progress bar's total."""
    import torch

    levels = _levels(torch, dev, plan)
    return ["DRAM bandwidth", *(f"{name} bandwidth" for name in sorted(levels)), *(f"{d} matmul" for d in plan.matmul_n)]


def steps_for(gpu: int | None) -> list[str]:
    """What calibrating GPU ``gpu`` (None: the first GPU, else the CPU) will measure, in order.

    Here, so that the command line that draws the progress bar never imports torch itself.
    """
    import torch

    target = torch.device(f"cuda:{gpu}" if gpu is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    return measured_steps(target, GPU_PLAN if target.type == "cuda" else CPU_PLAN)


def _levels(torch: Any, dev: Any, plan: CalibrationPlan) -> dict[str, int]:
    if not plan.caches:
        return {}
    return gpu_caches(torch, dev) if dev.type == "cuda" else cpu_caches()


def _measure(torch: Any, dev: Any, plan: CalibrationPlan, timer: Timer, started: float,
             progress: Progress) -> Calibration:
    gen = torch.Generator(device=dev).manual_seed(0)
    details: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    levels = _levels(torch, dev, plan)
    copy_bytes = plan.copy_bytes
    if levels:  # past twice the largest cache, so the copy streams from memory
        copy_bytes = min(max(copy_bytes, 2 * max(levels.values())), plan.max_copy_bytes) // 4 * 4
    sizes: dict[str, int] = {"copy_bytes": copy_bytes}

    progress("DRAM bandwidth")
    details["copy"] = _timed(timer, _copy(torch, copy_bytes, dev, gen))
    bandwidth = 2 * copy_bytes / details["copy"]["best_s"]

    caches: dict[str, dict[str, float]] = {}
    for name, capacity in sorted(levels.items()):
        progress(f"{name} bandwidth")
        nbytes = max(4096, min(capacity // 4, MAX_CACHE_COPY_BYTES, plan.max_copy_bytes)) // 4 * 4
        sizes[f"copy_{name}"] = nbytes
        details[f"copy_{name}"] = _timed(timer, _copy(torch, nbytes, dev, gen))
        caches[name] = {"capacity": capacity, "bandwidth": 2 * nbytes / details[f"copy_{name}"]["best_s"]}
    caches, unusable = usable_caches(caches, bandwidth)
    skipped.update(unusable)

    flops: dict[str, float] = {}
    for dtype, n in plan.matmul_n.items():
        progress(f"{dtype} matmul")
        try:
            call = _matmul(torch, dtype, n, dev, gen)
        except _Unsupported as exc:
            skipped[dtype] = str(exc)
            continue
        sizes[f"matmul_{dtype}"] = n
        with _fp32_precision(torch, "high" if dtype == "tf32" else "highest"):
            details[f"matmul_{dtype}"] = _timed(timer, call)
        flops[dtype] = 2 * n**3 / details[f"matmul_{dtype}"]["best_s"]
        del call
    name = "cpu"
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        name = torch.cuda.get_device_name(dev)
    return Calibration(device=name, bandwidth=bandwidth, flops=flops, sizes=sizes, timer=timer.name,
                       details=details, skipped=skipped, seconds=time.perf_counter() - started, caches=caches)


def usable_caches(caches: dict[str, dict[str, float]],
                  dram_bandwidth: float) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """Keep the cache roofs above DRAM's; name the others and why.

    A cache level copied no faster than DRAM measured something else (a VM's reported L3, which
    is DRAM; on a GPU, launch gaps): on an H100 (50 MiB L2)
    a 12.5 MiB copy takes ~5 µs, about the launch gap around it, and came out at 1.7–2.5 TB/s
    against DRAM's 3.0. Kept, it would be printed, cached and stored as the device's L2 roof,
    a figure nobody should read as the cache's speed (the roofline already skips it).
    """
    kept: dict[str, dict[str, float]] = {}
    unusable: dict[str, str] = {}
    for name, roof in caches.items():
        if roof["bandwidth"] > dram_bandwidth:
            kept[name] = roof
        else:
            unusable[name] = (f"its copy ran at {roof['bandwidth'] / 1e9:,.0f} GB/s, no faster than DRAM's "
                              f"{dram_bandwidth / 1e9:,.0f} GB/s, so it is no roof above DRAM's")
    # A smaller level is nearer the cores: slower than a larger one is physically implausible
    # (a busy host during its copy, or a level the copy never fitted in). Not used, and said.
    by_size = sorted(kept, key=lambda level: kept[level]["capacity"])
    for smaller, larger in zip(by_size, by_size[1:], strict=False):
        if kept[smaller]["bandwidth"] <= kept[larger]["bandwidth"]:
            unusable[smaller] = (f"its copy ran at {kept[smaller]['bandwidth'] / 1e9:,.0f} GB/s, no faster than "
                                 f"{larger}'s {kept[larger]['bandwidth'] / 1e9:,.0f} GB/s, a larger level: "
                                 "implausible, so it is not used (calibrate again on a quiet host)")
    return {level: roof for level, roof in kept.items() if level not in unusable}, unusable


DRIFT_FACTOR = 2.0  # a peak that moved more than this between calibrations of one device is flagged


def drift(previous: Calibration, current: Calibration, factor: float = DRIFT_FACTOR) -> list[str]:
    """The peaks of one device that moved more than ``factor``-fold since its previous calibration.

    Hardware does not halve or double between two calibrations: such a move means one of
    them measured a busy host (or a throttled GPU), and the roofline would change with it.
    """
    pairs = [("DRAM bandwidth", previous.bandwidth, current.bandwidth, "B/s")]
    pairs += [(f"{dtype} compute", previous.flops[dtype], current.flops[dtype], "FLOP/s")
              for dtype in sorted(set(previous.flops) & set(current.flops))]
    pairs += [(f"{level} bandwidth", previous.caches[level]["bandwidth"], current.caches[level]["bandwidth"], "B/s")
              for level in sorted(set(previous.caches) & set(current.caches))]
    return [f"{what}: {_rate(new, unit)}, {new / old:.2g}x the previous calibration's {_rate(old, unit)}"
            for what, old, new, unit in pairs if old > 0 and new > 0 and max(new / old, old / new) > factor]


def _timed(timer: Timer, call: Callable[[], object]) -> dict[str, Any]:
    result = timer.measure(call)
    return {"best_s": min(result.samples), "median_s": result.median, "n": result.n,
            "converged": result.converged, "timer": result.timer}


def _copy(torch: Any, nbytes: int, dev: Any, gen: Any) -> Callable[[], object]:
    """A call reading ``nbytes`` (fp32, random) and writing them to a second buffer."""
    src = torch.randn(nbytes // 4, generator=gen, device=dev)
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def _matmul(torch: Any, dtype: str, n: int, dev: Any, gen: Any) -> Callable[[], object]:
    """A call doing one ``n``×``n``×``n`` product in ``dtype``; raises ``_Unsupported``."""
    on_gpu = dev.type == "cuda"
    if dtype == "fp8":
        if not on_gpu:
            raise _Unsupported("no fp8 matrix units on a CPU")
        if torch.cuda.get_device_capability(dev) < (8, 9):
            raise _Unsupported("fp8 matmul needs compute capability 8.9 or newer")
        a = torch.randn(n, n, generator=gen, device=dev).to(torch.float8_e4m3fn)
        # _scaled_mm wants its second operand column-major.
        b = torch.randn(n, n, generator=gen, device=dev).to(torch.float8_e4m3fn).t()
        scale = torch.ones((), device=dev, dtype=torch.float32)

        def fp8() -> object:
            return torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16,
                                    use_fast_accum=True)

        try:
            fp8()
        except (RuntimeError, TypeError) as exc:
            raise _Unsupported(f"torch._scaled_mm: {exc}".splitlines()[0]) from exc
        return fp8
    if dtype == "tf32" and not on_gpu:
        raise _Unsupported("TF32 is a GPU tensor-core format")
    torch_dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    a = torch.randn(n, n, generator=gen, device=dev, dtype=torch_dtype)
    b = torch.randn(n, n, generator=gen, device=dev, dtype=torch_dtype)
    out = torch.empty(n, n, device=dev, dtype=torch_dtype)
    return lambda: torch.matmul(a, b, out=out)


@contextmanager
def _fp32_precision(torch: Any, precision: str) -> Iterator[None]:
    """fp32 matmuls in ``precision`` ("highest": IEEE fp32, "high": TF32 allowed) for a while."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


# --- reporting ------------------------------------------------------------------------------


def _rate(value: float, unit: str) -> str:
    """``4.31 TB/s``, ``812 TFLOP/s``, ``19.0 GFLOP/s``: three significant figures, SI prefix."""
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def peak_rows(calibration: Calibration, datasheet: Peaks | None) -> list[tuple[str, str, str, str]]:
    """(peak, measured, datasheet, measured/datasheet) per measured roof, for a table.

    Dashes where the datasheet has no figure (any CPU; a GPU not in ``DATASHEET_PEAKS``).
    """
    rows = [_row("DRAM bandwidth", calibration.bandwidth, datasheet.bandwidth if datasheet else None, "B/s")]
    for name, roof in sorted(calibration.caches.items()):
        rows.append(_row(f"{name} bandwidth ({_capacity(roof['capacity'])})", roof["bandwidth"], None, "B/s"))
    for dtype, measured in calibration.flops.items():
        listed = datasheet.flops.get(dtype) if datasheet else None
        rows.append(_row(f"{dtype} matmul", measured, listed, "FLOP/s"))
    return rows


def _capacity(nbytes: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


def _row(label: str, measured: float, listed: float | None, unit: str) -> tuple[str, str, str, str]:
    if not listed:
        return label, _rate(measured, unit), "—", "—"
    return label, _rate(measured, unit), _rate(listed, unit), f"{measured / listed:.0%}"


# --- for workers: measure once per device and host, in a subprocess -------------------------


def cache_path(data_dir: Path, fingerprint: str) -> Path:
    return data_dir / "calibration" / f"{fingerprint}.json"


def load_cached(data_dir: Path, fingerprint: str) -> Calibration | None:
    path = cache_path(data_dir, fingerprint)
    try:
        return Calibration.from_json(path.read_text(encoding="utf-8"))
    except (OSError, CalibrationError):
        return None


def store_cached(data_dir: Path, fingerprint: str, calibration: Calibration) -> Path:
    path = cache_path(data_dir, fingerprint)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(calibration.to_json(), encoding="utf-8")
    partial.replace(path)  # atomic: a reader sees the old file or the whole new one
    return path


def with_peaks(info: DeviceInfo, calibration: Calibration) -> DeviceInfo:
    return info.model_copy(update={"peak_bandwidth": calibration.bandwidth, "peak_flops": dict(calibration.flops),
                                   "cache_roofs": {k: dict(v) for k, v in calibration.caches.items()}})


def calibrate_in_subprocess(gpu: int | None = None, timeout_s: float = CALIBRATION_TIMEOUT_S) -> Calibration:
    """``python -m roofwatch.workers.calibrate`` in a child process; its CUDA context dies with it."""
    command = [sys.executable, "-m", "roofwatch.workers.calibrate", *(["--gpu", str(gpu)] if gpu is not None else [])]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise CalibrationError(f"calibration took longer than {timeout_s:.0f} s") from exc
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise CalibrationError(f"calibration exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return Calibration.from_json(lines[-1])


def calibrated(info: DeviceInfo, data_dir: Path,
               measure: Callable[[], Calibration] = calibrate_in_subprocess) -> DeviceInfo:
    """``info`` with this host's measured peaks: cached by fingerprint, else measured now.

    A device that cannot be measured is still registered, without peaks (the datasheet then
    stands in, marked as such); a worker never fails to start over its calibration.
    """
    calibration = load_cached(data_dir, info.fingerprint)
    if calibration is None:
        log.info("calibrating %s (no measured peaks cached for this device)", info.device_class)
        try:
            calibration = measure()
        except CalibrationError as exc:
            log.warning("calibration of %s failed, registering it without measured peaks: %s",
                        info.device_class, exc)
            return info
        store_cached(data_dir, info.fingerprint, calibration)
        log.info("calibrated %s in %.1f s", info.device_class, calibration.seconds)
    return with_peaks(info, calibration)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m roofwatch.workers.calibrate", description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=int, default=None, help="CUDA device index (default: 0, or the CPU)")
    args = parser.parse_args(argv)
    try:
        calibration = calibrate(f"cuda:{args.gpu}" if args.gpu is not None else None)
    except CalibrationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(calibration.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
