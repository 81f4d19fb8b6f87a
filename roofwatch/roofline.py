"""Roofline model: how fast a kernel could run on a device, and how close it came.

For a kernel doing ``flops`` FLOP over ``bytes`` of compulsory traffic, the attainable rate is
``min(peak_flops, AI * peak_bw)`` with arithmetic intensity ``AI = flops / bytes`` (Williams,
Waterman & Patterson, "Roofline", CACM 2009). The fraction reached is achieved / attainable,
which equals the shortest time the roofs allow divided by the measured time. A fraction above
1 means the declared work, the peaks or the timer is wrong; it is a harness error, not a win —
except within ``ROOF_MARGIN`` of the roof, the measurement error of a measured roof.

Peaks should be the ones ``roofwatch calibrate`` measured on the device; ``DATASHEET_PEAKS``
is only the fallback when no calibration exists, and ``Peaks.source`` says which was used.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

# A measured roof is a sample, not a law. On an H100 the best streaming kernels (add and swiglu,
# two reads per write) ran 0.6–1.0 % faster than the copy that measured the DRAM roof
# (docs/performance.md). A call within this margin above a roof is placed at that roof
# (fraction 1); only beyond it is the declared work, a peak or the timer wrong. Such errors are
# a tensor counted twice or not at all: tens of percent, far past 3 %.
ROOF_MARGIN = 0.03

__all__ = [
    "DATASHEET_PEAKS",
    "ROOF_MARGIN",
    "Bound",
    "CacheRoof",
    "Peaks",
    "RooflineError",
    "achieved_bandwidth",
    "achieved_flops",
    "arithmetic_intensity",
    "attainable_flops",
    "bound_by",
    "datasheet_peaks",
    "compute_roof",
    "roof_dtype",
    "roofline_fraction",
]


class RooflineError(ValueError):
    """The inputs describe something faster than the hardware allows, or are not valid."""


@dataclass(frozen=True)
class CacheRoof:
    """One cache level's roof: its ``capacity`` in bytes and the copy ``bandwidth`` (bytes/s) it sustains."""

    name: str  # "L2", "L3"
    capacity: int
    bandwidth: float


@dataclass(frozen=True)
class Peaks:
    """Peak rates of one device.

    ``bandwidth`` is DRAM bandwidth in bytes/s; ``flops`` maps a dtype name (``fp32``,
    ``tf32``, ``fp16``, ``bf16``, ``fp8``) to FLOP/s; ``source`` tells measured peaks from
    datasheet ones, so a report can say which roof it was held to. ``caches`` are the measured
    cache-level roofs (the hierarchical roofline); ``warm_caches`` says the harness measures with
    warm caches on this device (a CPU: the host timer flushes nothing), so a working set that fits
    a cache is held to that cache's roof from the start.
    """

    bandwidth: float
    flops: Mapping[str, float]
    source: Literal["measured", "datasheet", "modelled"]
    caches: tuple[CacheRoof, ...] = ()
    warm_caches: bool = False

    def memory_levels(self) -> list[tuple[str, float, float]]:
        """``(name, capacity in bytes, bandwidth)`` from DRAM up to the fastest cache."""
        levels = [("DRAM", math.inf, self.bandwidth)]
        levels += [(c.name, float(c.capacity), c.bandwidth) for c in self.caches if c.bandwidth > self.bandwidth]
        return sorted(levels, key=lambda level: level[2])


@dataclass(frozen=True)
class Bound:
    """The roof one measurement is held to: a memory level, its bandwidth, and the fraction reached."""

    roof: str  # "DRAM", "L3", "L2"
    bandwidth: float  # bytes/s
    fraction: float


_T = 1e12

# DATASHEET VALUES, not measurements: NVIDIA's published SXM specifications, dense (the
# datasheets print 2:4-sparse tensor-core rates, twice these). fp16/bf16/tf32/fp8 are tensor-core
# rates; element-wise kernels whose math runs on CUDA cores should be held to ``fp32``.
# Sustained bandwidth is typically 85-92 % of these figures, so fractions against them read low.
DATASHEET_PEAKS: dict[str, Peaks] = {
    "NVIDIA H200": Peaks(
        bandwidth=4.8e12,
        flops={
            "fp32": 67 * _T,
            "tf32": 494.7 * _T,
            "fp16": 989.4 * _T,
            "bf16": 989.4 * _T,
            "fp8": 1978.9 * _T,
        },
        source="datasheet",
    ),
    "NVIDIA H100 80GB HBM3": Peaks(
        bandwidth=3.35e12,
        flops={
            "fp32": 67 * _T,
            "tf32": 494.7 * _T,
            "fp16": 989.4 * _T,
            "bf16": 989.4 * _T,
            "fp8": 1978.9 * _T,
        },
        source="datasheet",
    ),
    "NVIDIA A100-SXM4-80GB": Peaks(
        bandwidth=2.039e12,
        flops={"fp32": 19.5 * _T, "tf32": 156 * _T, "fp16": 312 * _T, "bf16": 312 * _T},
        source="datasheet",
    ),
    "NVIDIA A100-SXM4-40GB": Peaks(
        bandwidth=1.555e12,
        flops={"fp32": 19.5 * _T, "tf32": 156 * _T, "fp16": 312 * _T, "bf16": 312 * _T},
        source="datasheet",
    ),
}


def datasheet_peaks(device_name: str) -> Peaks | None:
    """Datasheet peaks for a device as ``torch.cuda.get_device_name`` reports it, if known."""
    return DATASHEET_PEAKS.get(device_name)


def _require_positive(**values: float) -> None:
    for name, value in values.items():
        if not value > 0:  # also rejects NaN
            raise RooflineError(f"{name} must be positive, got {value}")


def arithmetic_intensity(flops: float, bytes_moved: float) -> float:
    """FLOP per byte of compulsory traffic."""
    _require_positive(bytes_moved=bytes_moved)
    if flops < 0:
        raise RooflineError(f"flops must be non-negative, got {flops}")
    return flops / bytes_moved


def attainable_flops(intensity: float, peak_flops: float, peak_bandwidth: float) -> float:
    """``min(peak_flops, intensity * peak_bandwidth)`` in FLOP/s; bandwidth in bytes/s."""
    _require_positive(peak_flops=peak_flops, peak_bandwidth=peak_bandwidth)
    if intensity < 0:
        raise RooflineError(f"intensity must be non-negative, got {intensity}")
    return min(peak_flops, intensity * peak_bandwidth)


def achieved_flops(flops: float, seconds: float) -> float:
    """FLOP/s reached by one call doing ``flops`` FLOP in ``seconds``."""
    _require_positive(seconds=seconds)
    return flops / seconds


def achieved_bandwidth(bytes_moved: float, seconds: float) -> float:
    """Bytes/s reached by one call moving ``bytes_moved`` bytes in ``seconds``."""
    _require_positive(seconds=seconds)
    return bytes_moved / seconds


def roofline_fraction(
    flops: float,
    bytes_moved: float,
    seconds: float,
    peak_flops: float,
    peak_bandwidth: float,
) -> float:
    """Fraction of the attainable roofline one call reached, in ``[0, 1]``.

    Computed as ``max(flops / peak_flops, bytes_moved / peak_bandwidth) / seconds``: the
    shortest time either roof allows over the time measured. It equals
    ``achieved_flops / attainable_flops`` and stays defined for kernels with no FLOPs (copies).

    Raises:
        RooflineError: on non-positive peaks, time or bytes, or when the fraction exceeds
            1 + ``ROOF_MARGIN`` (up to that, the call is at the roof: 1).
    """
    _require_positive(
        bytes_moved=bytes_moved,
        seconds=seconds,
        peak_flops=peak_flops,
        peak_bandwidth=peak_bandwidth,
    )
    if flops < 0:
        raise RooflineError(f"flops must be non-negative, got {flops}")
    fastest = max(flops / peak_flops, bytes_moved / peak_bandwidth)
    fraction = fastest / seconds
    if fraction > 1 + ROOF_MARGIN:
        raise RooflineError(
            f"measured {seconds:.3e} s is faster than the roofline's {fastest:.3e} s "
            f"(fraction {fraction:.3f}); the declared FLOPs/bytes, the peaks or the timer is wrong"
        )
    return min(fraction, 1.0)


def bound_by(peaks: Peaks, flops: float, bytes_moved: float, seconds: float, peak_flops: float) -> Bound:
    """The hierarchical roofline: which memory level's roof bounds one call, and how close it came.

    The search starts at DRAM, or with warm caches at the smallest cache that holds the working
    set (``bytes_moved``), where a warm call finds its data; a call faster than that roof must have been served by a faster
    level (a working set partly resident), so the next one up is tried. Only a call faster than
    the fastest roof is an error: then the declared work, the peaks or the timer is wrong. This
    is how Nsight Compute's hierarchical roofline places one kernel against L1, L2 and DRAM.

    Raises:
        RooflineError: on non-positive inputs, or when the call beats every roof.
    """
    _require_positive(bytes_moved=bytes_moved, seconds=seconds, peak_flops=peak_flops)
    levels = peaks.memory_levels()
    start = 0
    if peaks.warm_caches:
        start = max(i for i, (_, capacity, _) in enumerate(levels) if capacity >= bytes_moved)
    fraction = math.inf
    for name, _, bandwidth in levels[start:]:
        fraction = roofline_fraction_unchecked(flops, bytes_moved, seconds, peak_flops, bandwidth)
        if fraction <= 1 + ROOF_MARGIN:
            return Bound(name, bandwidth, min(fraction, 1.0))
    raise RooflineError(
        f"measured {seconds:.3e} s is faster than every roof (fraction {fraction:.3f} of the fastest, "
        f"{levels[-1][0]}); the declared FLOPs/bytes, the peaks or the timer is wrong"
    )


def roofline_fraction_unchecked(flops: float, bytes_moved: float, seconds: float, peak_flops: float,
                                peak_bandwidth: float) -> float:
    """``max(flops / peak_flops, bytes / peak_bandwidth) / seconds``, which may exceed 1."""
    if flops < 0:
        raise RooflineError(f"flops must be non-negative, got {flops}")
    return max(flops / peak_flops, bytes_moved / peak_bandwidth) / seconds


# Spellings of the dtypes the roofs are measured for, as suites write them in ``extra_info``.
_ROOF_DTYPE_ALIASES = {"float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16"}


def roof_dtype(dtype: str) -> str:
    """The roof a benchmark's ``dtype`` is held to: ``fp8e4m3``, ``float8_e5m2`` … → ``fp8``.

    Calibration measures one fp8 roof; suites name the format (roofwatch's own say ``fp8e4m3``).
    Without this an H100's fp8 matmul was held to the fp32 roof: 18× over it, a harness error.
    """
    name = dtype.strip().lower().removeprefix("torch.")
    if name.startswith(("fp8", "float8")):
        return "fp8"
    return _ROOF_DTYPE_ALIASES.get(name, name)


def compute_roof(flops: Mapping[str, float], dtype: str) -> float | None:
    """The peak FLOP/s a ``dtype`` kernel is held to: its own roof (``roof_dtype``), else fp32's,
    else the lowest one, so the fraction is never flattered; None without any compute roof."""
    return flops.get(roof_dtype(dtype)) or flops.get("fp32") or (min(flops.values()) if flops else None)
