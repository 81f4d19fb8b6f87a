"""The roofs a device's measurements are held to: measured peaks first, datasheet as fallback."""

from __future__ import annotations

from service.core.models import Device
from suites.roofline import Peaks, datasheet_peaks, roofline_fraction
from workers.device import is_cpu


def peaks_for(device: Device) -> Peaks | None:
    """Calibrated peaks when ``roofwatch calibrate`` stored them, else datasheet ones, else None.

    A CPU gets no roofs: its benchmarks are small enough to run from cache and the harness
    flushes no CPU cache, so a DRAM roof would be beaten by every cache-resident case and
    reported as a harness error, not as a fraction anyone could act on.
    """
    if is_cpu(device.device_class):
        return None
    if device.peak_bandwidth and device.peak_flops:
        return Peaks(bandwidth=device.peak_bandwidth, flops=dict(device.peak_flops),
                     source="datasheet" if device.peaks_source == "datasheet" else "measured")
    return datasheet_peaks(device.device_class)


def fraction_of_roofline(peaks: Peaks, flops: float, bytes_moved: float, seconds: float,
                         dtype: str) -> float:
    """Roofline fraction for one call; raises ``RooflineError`` above 1 (a harness error).

    A dtype without its own compute roof is held to the fp32 one (``compute_roof``): the
    slowest roof the device has, so the fraction is never flattered.
    """
    return roofline_fraction(flops, bytes_moved, seconds, compute_roof(peaks, dtype), peaks.bandwidth)


def compute_roof(peaks: Peaks, dtype: str) -> float:
    """The peak FLOP/s a ``dtype`` kernel is held to: its own roof, else fp32's, else the lowest one."""
    return peaks.flops.get(dtype) or peaks.flops.get("fp32") or min(peaks.flops.values())
