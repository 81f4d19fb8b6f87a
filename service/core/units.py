"""How roofwatch prints a measured duration or size, wherever it prints one: terminal, PR comment."""

from __future__ import annotations

import math


def seconds(value: float) -> str:
    """A duration in the unit that reads best: ``11.4 ms``, ``250 µs``, ``1,234 s``; three significant digits."""
    if abs(value) >= 1000:
        return f"{value:,.0f} s"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
        # Rounded before choosing the unit, so 999.7 µs reads "1 ms", not "1e+03 µs".
        scaled = float(f"{value / scale:.3g}")
        if abs(scaled) >= 1 or unit == "ns":
            return f"{significant_digits(scaled, 3)} {unit}"
    raise AssertionError("unreachable")


def byte_size(value: float) -> str:
    """A size in binary units, three significant digits: ``512 B``, ``1.50 MiB``, ``12.0 GiB``."""
    for scale, unit in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        scaled = float(f"{value / scale:.3g}")
        if abs(scaled) >= 1:
            return f"{significant_digits(scaled, 3)} {unit}"
    return f"{value:,.0f} B"


def quantity(value: float, unit: str) -> str:
    """``value`` in ``unit`` as it reads best: seconds and bytes scaled (``4.19 ms``, ``1.50 MiB``), others plain."""
    if unit == "s":
        return seconds(value)
    if unit == "B":
        return byte_size(value)
    number = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return f"{number} {unit}".strip()


def significant_digits(value: float, digits: int) -> str:
    """``value`` with ``digits`` significant digits, trailing zeros kept: 25.0 and 23.5 line up, 25 would not."""
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def level_text(confidence: float) -> str:
    """A confidence level as a label says it: ``99 %``, ``99.8 %``; never rounded up past what it is
    (99.96 % reads ``99.9 %``, not ``100 %``)."""
    tenths = math.floor(round(confidence * 1000, 6)) / 10
    return f"{tenths:.0f} %" if tenths == int(tenths) else f"{tenths:.1f} %"


# --- the metric a benchmark is read in, and a change said in it -----------------------------------

# Below ~10 FLOP/byte a kernel is memory-bound on every current GPU (ridge points run from ~10
# FLOP/byte for fp32 to ~300 for bf16 tensor cores), so bandwidth is the number that says how good
# it is; above, FLOP/s is.
MEMORY_BOUND_INTENSITY = 10.0
METRIC_NAMES = {"flops": "throughput", "bytes": "bandwidth", "time": "time", "raw": "value"}


def metric_kind(unit: str, flops: float | None, bytes_moved: float | None) -> str:
    """``flops``, ``bytes``, ``time`` or ``raw``: what the dashboard plots a benchmark as.

    A timed benchmark that declares the work it does is read as throughput (higher is better, and
    numbers compare across shapes), otherwise as its time; a benchmark in another unit as its value.
    """
    if unit != "s":
        return "raw"
    if flops and bytes_moved:
        return "flops" if flops / bytes_moved >= MEMORY_BOUND_INTENSITY else "bytes"
    if flops:
        return "flops"
    return "bytes" if bytes_moved else "time"


def change_in_metric(time_change_pct: float | None, kind: str) -> float | None:
    """A change measured on the median (time, in % of the old) said in the metric the chart plots.

    Throughput and bandwidth are work over time: a time 2× (+100 %) is a bandwidth of ½ (−50 %).
    """
    if time_change_pct is None or not math.isfinite(time_change_pct):
        return None
    if kind not in ("flops", "bytes"):
        return time_change_pct
    ratio = 1.0 + time_change_pct / 100.0
    return 100.0 * (1.0 / ratio - 1.0) if ratio > 0 else None


def change_text(time_change_pct: float | None, kind: str) -> str:
    """``bandwidth −50.1 %``, ``throughput +357 %``, ``time +12.0 %``: the sign of the plotted line."""
    shown = change_in_metric(time_change_pct, kind)
    if shown is None:
        return ""
    number = f"{shown:+.0f}" if abs(shown) >= 100 else f"{shown:+.1f}"
    return f"{METRIC_NAMES.get(kind, 'value')} {number.replace('-', '−')} %"


def interval_in_metric(time_low: float | None, time_high: float | None, kind: str) -> tuple[float, float] | None:
    """A change's interval (on the time) in the metric the chart plots, low first: bounds swap for throughput."""
    low, high = change_in_metric(time_low, kind), change_in_metric(time_high, kind)
    if low is None or high is None:
        return None
    return (low, high) if low <= high else (high, low)


def bounds_text(low: float, high: float) -> str:
    """``[−51.0, −49.2]``: an interval in %, with the minus sign the changes are printed with."""
    return f"[{low:+.1f}, {high:+.1f}]".replace("-", "−")


def interval_text(time_low: float | None, time_high: float | None, kind: str) -> str:
    """A change's interval in the same metric: ``[−51.0, −49.2]``."""
    bounds = interval_in_metric(time_low, time_high, kind)
    return "" if bounds is None else bounds_text(*bounds)
