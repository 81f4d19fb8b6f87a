"""The roofline chart: arithmetic intensity against achieved FLOP/s under a device's roofs.

Rows in, figure dict out: no database, no HTTP. Traces are plain dicts rather than
``plotly.graph_objects``, because a thousand benchmarks make thousands of points and
plotly's per-property validation would cost more than the query behind them. Every trace
carries a ``meta`` role (``roof``, ``ridge``, ``latest``, ``earlier``, ``shift``) so that
tests and scripts can find them without parsing names.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from roofwatch.dashboard.escaping import plotly_text
from roofwatch.roofline import Bound, Peaks, RooflineError, roof_dtype
from roofwatch.service.records.roofline import bound_of, roof_of

# Colours by dtype, so one kernel's fp16 and fp32 variants read as related but distinct.
DTYPE_COLORS = {"fp32": "#1f77b4", "tf32": "#17becf", "fp16": "#ff7f0e", "bf16": "#d62728", "fp8": "#9467bd"}
OTHER_COLOR = "#7f7f7f"
ROOF_COLOR = "#1d232a"
CACHE_ROOF_COLOR = "#8c959f"  # cache-level roofs: lighter than DRAM's, which bounds what streams from memory


@dataclass(frozen=True)
class KernelPoint:
    """One benchmark's measurement: the declared work per call and the median time it took."""

    benchmark_id: int
    name: str
    shape: str
    dtype: str
    impl: str
    flops: float  # FLOP per call, > 0
    bytes: float  # bytes of compulsory traffic per call, > 0
    median: float  # seconds per call, > 0
    run_id: int
    sha: str
    stored_fraction: float | None = None  # the fraction computed when the run was ingested

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes

    @property
    def achieved(self) -> float:
        return self.flops / self.median


def attainable(peaks: Peaks, intensity: float, dtype: str) -> float:
    """``min(compute roof, AI × bandwidth)``: the most FLOP/s a kernel of this intensity can reach."""
    return min(roof_of(peaks, dtype), intensity * peaks.bandwidth)


def bound(point: KernelPoint, peaks: Peaks | None) -> Bound | None:
    """The roof that bounds the point (DRAM or a cache level, hierarchical roofline); None without
    roofs, or when the point beats every roof (a harness error, not a place on the chart)."""
    if peaks is None:
        return None
    try:
        return bound_of(peaks, point.flops, point.bytes, point.median, point.dtype)
    except RooflineError:
        return None


def fraction(point: KernelPoint, peaks: Peaks | None) -> float | None:
    """How close the point came to the roof that bounds it; the stored fraction when there are none.

    Computed against the roofs on the chart, not read from the measurement, so a device calibrated
    after the run was ingested shows points and percentages that agree with the lines.
    """
    if peaks is None:
        return point.stored_fraction
    held = bound(point, peaks)
    return held.fraction if held else point.achieved / attainable(peaks, point.intensity, point.dtype)


def ridge_points(peaks: Peaks) -> list[tuple[str, float, float]]:
    """``(dtypes, intensity, FLOP/s)`` where the bandwidth slope meets each compute roof, lowest first.

    Dtypes that share a peak (fp16 and bf16 on tensor cores) share one roof, named ``fp16/bf16``.
    """
    by_peak: dict[float, list[str]] = defaultdict(list)
    for dtype, peak in peaks.flops.items():
        if peak > 0:
            by_peak[peak].append(dtype)
    return [("/".join(sorted(by_peak[peak])), peak / peaks.bandwidth, peak) for peak in sorted(by_peak)]


def x_range(points: Iterable[KernelPoint], peaks: Peaks | None) -> tuple[float, float]:
    """Intensities to draw: every point and ridge, with a factor of 3 of air on both sides."""
    xs = [p.intensity for p in points]
    if peaks is not None:
        xs += [intensity for _, intensity, _ in ridge_points(peaks)]
    if not xs:
        return 0.1, 1000.0
    return min(xs) / 3, max(xs) * 3


def roof_traces(peaks: Peaks, low: float, high: float, dtypes: Collection[str] = ()) -> list[dict[str, Any]]:
    """The bandwidth slope up to the highest ridge, one flat roof per compute peak, and the ridges.

    Each flat roof starts at its own ridge point, where it meets the slope: left of it the
    kernel is bandwidth-bound, right of it compute-bound. With ``dtypes`` (those of the points
    drawn) only the roofs they are held to are drawn; each is labelled with its dtypes and value.
    """
    ridges = ridge_points(peaks)
    if dtypes:
        held_to = {roof_of(peaks, dtype) for dtype in dtypes}
        ridges = [ridge for ridge in ridges if ridge[2] in held_to] or ridges
    source = peaks.source
    # Datasheet roofs are dashed: they are what the vendor prints, not what this device sustains.
    # A modelled device's roofs are exactly what it sustains, by construction: solid.
    line = {"color": ROOF_COLOR, "width": 2, "dash": "dash" if source == "datasheet" else "solid"}
    top = max((intensity for _, intensity, _ in ridges), default=high)
    slope_end = max(top, low)
    traces: list[dict[str, Any]] = [{
        "type": "scatter", "mode": "lines", "meta": "roof", "name": f"memory bandwidth ({source})",
        "x": [low, slope_end], "y": [low * peaks.bandwidth, slope_end * peaks.bandwidth], "line": line,
        "hoverinfo": "text", "hovertext": f"{peaks.bandwidth / 1e9:.4g} GB/s ({source})",
    }]
    # The hierarchical roofline: one slope per cache level faster than DRAM, up to the highest roof.
    highest = max((peak for _, _, peak in ridges), default=0.0)
    for name, capacity, bandwidth in peaks.memory_levels()[1:]:
        end = max(highest / bandwidth, low * 1.01) if highest else high
        traces.append({
            "type": "scatter", "mode": "lines", "meta": "cache-roof", "name": plotly_text(f"{name} bandwidth ({source})"),
            "x": [low, end], "y": [low * bandwidth, end * bandwidth],
            "line": {"color": CACHE_ROOF_COLOR, "width": 1.5, "dash": "dot"}, "hoverinfo": "text",
            "hovertext": plotly_text(f"{name} ({capacity / 2**20:.3g} MiB): {bandwidth / 1e9:.4g} GB/s ({source})"),
        })
    for dtypes, intensity, peak in ridges:
        traces.append({
            "type": "scatter", "mode": "lines+text", "meta": "roof", "name": plotly_text(f"{dtypes} roof ({source})"),
            "x": [intensity, max(high, intensity)], "y": [peak, peak], "line": line,
            # Labelled on the chart, not only in the legend: several roofs are one colour.
            "text": ["", plotly_text(f"{dtypes} {_flops(peak)}")], "textposition": "top left",
            "textfont": {"color": ROOF_COLOR, "size": 11},
            "hoverinfo": "text", "hovertext": plotly_text(f"{dtypes}: {peak / 1e12:.4g} TFLOP/s ({source})"),
        })
    traces.append({
        "type": "scatter", "mode": "markers", "meta": "ridge", "name": "ridge points",
        "x": [intensity for _, intensity, _ in ridges], "y": [peak for _, _, peak in ridges],
        "marker": {"color": ROOF_COLOR, "size": 7, "symbol": "diamond"}, "hoverinfo": "text",
        "hovertext": [plotly_text(f"ridge {dtypes}: {intensity:.3g} FLOP/byte") for dtypes, intensity, _ in ridges],
    })
    return traces


def _flops(value: float) -> str:
    """``51.2 TFLOP/s``, ``812 GFLOP/s``: the unit that keeps three significant figures readable."""
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}FLOP/s"
    return f"{value:.3g} FLOP/s"


def hover(point: KernelPoint, peaks: Peaks | None, label: str) -> str:
    """Plotly markup: the suite's names, shape, dtype and impl are escaped, the line breaks are not."""
    share = fraction(point, peaks)
    held = bound(point, peaks)
    impl = f" · {plotly_text(point.impl)}" if point.impl else ""
    percent = f"{100 * share:.1f}% of roofline" if share is not None else "no roofs to compare against"
    if held is not None:
        percent += plotly_text(f", bounded by the {held.roof} roof ({held.bandwidth / 1e9:.4g} GB/s)")
    elif peaks is not None:
        percent = "faster than every roof: the declared work, the peaks or the timer is wrong"
    return (f"{plotly_text(point.name)}<br>shape {plotly_text(point.shape or '—')} · "
            f"{plotly_text(point.dtype or 'dtype ?')}{impl}<br>"
            f"{percent}<br>{point.intensity:.3g} FLOP/byte · {point.achieved / 1e12:.4g} TFLOP/s<br>"
            f"{plotly_text(label)} {plotly_text(point.sha[:10])} (run {point.run_id})")


def point_traces(points: list[KernelPoint], peaks: Peaks | None) -> list[dict[str, Any]]:
    """The latest measurements, one trace per dtype so the legend can hide a precision."""
    by_dtype: dict[str, list[KernelPoint]] = defaultdict(list)
    for point in points:
        by_dtype[point.dtype].append(point)
    return [{
        "type": "scatter", "mode": "markers", "meta": "latest", "name": plotly_text(f"latest · {dtype or 'no dtype'}"),
        "x": [p.intensity for p in group], "y": [p.achieved for p in group],
        "customdata": [p.benchmark_id for p in group], "hoverinfo": "text",
        "hovertext": [hover(p, peaks, "latest") for p in group],
        "marker": {"color": DTYPE_COLORS.get(roof_dtype(dtype), OTHER_COLOR), "size": 8, "line": {"width": 1, "color": "#fff"}},
    } for dtype, group in sorted(by_dtype.items())]


def moved(latest: list[KernelPoint], earlier: list[KernelPoint]) -> list[tuple[KernelPoint, KernelPoint]]:
    """``(earlier, latest)`` for each benchmark measured again since the earlier point."""
    before = {p.benchmark_id: p for p in earlier}
    return [(before[p.benchmark_id], p) for p in latest
            if p.benchmark_id in before and before[p.benchmark_id].run_id != p.run_id]


def shift_traces(pairs: list[tuple[KernelPoint, KernelPoint]], peaks: Peaks | None) -> list[dict[str, Any]]:
    """Earlier points (hollow) and one arrow from each earlier point to its latest one.

    All arrows are one trace, segments separated by ``None``: a trace per benchmark would make
    the browser lay out a thousand legend entries.
    """
    if not pairs:
        return []
    xs: list[float | None] = []
    ys: list[float | None] = []
    sizes: list[int] = []
    for before, after in pairs:
        xs += [before.intensity, after.intensity, None]
        ys += [before.achieved, after.achieved, None]
        sizes += [0, 10, 0]  # an arrowhead only where the segment ends
    earlier = [before for before, _ in pairs]
    return [
        {"type": "scatter", "mode": "markers", "meta": "earlier", "name": plotly_text(f"earlier · {earlier[0].sha[:8]}"),
         "x": [p.intensity for p in earlier], "y": [p.achieved for p in earlier],
         "customdata": [p.benchmark_id for p in earlier], "hoverinfo": "text",
         "hovertext": [hover(p, peaks, "earlier") for p in earlier],
         "marker": {"color": "rgba(0,0,0,0)", "size": 8, "line": {"width": 1.5, "color": OTHER_COLOR}}},
        {"type": "scatter", "mode": "lines+markers", "meta": "shift", "name": "change since earlier",
         "x": xs, "y": ys, "hoverinfo": "skip", "line": {"color": OTHER_COLOR, "width": 1},
         "marker": {"symbol": "arrow", "angleref": "previous", "size": sizes, "color": OTHER_COLOR}},
    ]


def roofline_figure(latest: list[KernelPoint], earlier: list[KernelPoint], peaks: Peaks | None) -> dict[str, Any]:
    """The whole chart: roofs (when the device has any), arrows from ``earlier``, the latest points."""
    pairs = moved(latest, earlier)
    low, high = x_range([*latest, *(before for before, _ in pairs)], peaks)
    drawn = {p.dtype for p in [*latest, *(before for before, _ in pairs)]}
    data = roof_traces(peaks, low, high, drawn) if peaks is not None else []
    data += shift_traces(pairs, peaks) + point_traces(latest, peaks)
    return {"data": data, "layout": {
        "template": "plotly_white", "height": 620, "margin": {"l": 70, "r": 20, "t": 10, "b": 50},
        "hovermode": "closest", "legend": {"orientation": "h", "y": -0.12},
        "xaxis": {"type": "log", "title": {"text": "arithmetic intensity (FLOP/byte)"},
                  "range": [math.log10(low), math.log10(high)]},
        # d3's SI format: 1T, 10T, 100T, 1P, where plotly's own would switch to powers of ten.
        "yaxis": {"type": "log", "title": {"text": "achieved FLOP/s"}, "tickformat": "~s"},
    }}
