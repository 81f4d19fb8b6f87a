"""The roofs a device's measurements are held to: measured peaks first, datasheet as fallback."""

from __future__ import annotations

from typing import Literal

from roofwatch.common.task_names import is_cpu
from roofwatch.roofline import Bound, CacheRoof, Peaks, bound_by, compute_roof, datasheet_peaks
from roofwatch.service.core.models import Device


def peaks_for(device: Device) -> Peaks | None:
    """Calibrated peaks when ``roofwatch calibrate`` stored them, else datasheet ones, else None.

    Measured cache-level roofs come along, so a cache-resident benchmark is held to the cache it
    ran from. A CPU is measured with warm caches (the host timer flushes nothing), so its working
    sets start at the cache that holds them; it has no datasheet, so an uncalibrated CPU has no roofs.
    """
    cpu = is_cpu(device.device_class)
    if device.peak_bandwidth and device.peak_flops:
        caches = tuple(CacheRoof(name, int(roof["capacity"]), float(roof["bandwidth"]))
                       for name, roof in sorted((device.cache_roofs or {}).items()))
        return Peaks(bandwidth=device.peak_bandwidth, flops=dict(device.peak_flops),
                     source=_source(device.peaks_source),
                     caches=caches, warm_caches=cpu)
    return None if cpu else datasheet_peaks(device.device_class)


def _source(stored: str) -> Literal["measured", "datasheet", "modelled"]:
    """A device row's ``peaks_source`` as a roof's source; rows from before sources existed read "measured"."""
    if stored == "datasheet":
        return "datasheet"
    return "modelled" if stored == "modelled" else "measured"


def bound_of(peaks: Peaks, flops: float, bytes_moved: float, seconds: float, dtype: str) -> Bound:
    """The roof one call is held to (DRAM or a cache level) and the fraction of it reached."""
    return bound_by(peaks, flops, bytes_moved, seconds, roof_of(peaks, dtype))


def fraction_of_roofline(peaks: Peaks, flops: float, bytes_moved: float, seconds: float,
                         dtype: str) -> float:
    """Roofline fraction for one call against the roof that bounds it (``bound_of``); raises
    ``RooflineError`` when the call beats every roof (a harness error).

    A dtype without its own compute roof is held to the fp32 one (``roof_of``): the
    slowest roof the device has, so the fraction is never flattered.
    """
    return bound_of(peaks, flops, bytes_moved, seconds, dtype).fraction


def roof_of(peaks: Peaks, dtype: str) -> float:
    """The peak FLOP/s a ``dtype`` kernel is held to on a device of ``peaks`` (``roofwatch.roofline.compute_roof``)."""
    roof = compute_roof(peaks.flops, dtype)
    if roof is None:
        raise ValueError(f"{peaks.source} peaks hold no compute roof")
    return roof
