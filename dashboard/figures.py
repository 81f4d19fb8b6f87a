"""Plotly figure builders: rows in, figure JSON out (no database, no HTTP)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import plotly.io as pio
from markupsafe import Markup

from roofwatch.common.vocabulary import CLOSED_STATES
from roofwatch.dashboard.downsampling import downsample
from roofwatch.dashboard.escaping import plotly_text
from roofwatch.dashboard.metrics import Metric
from roofwatch.service.core.units import change_text

PLOT_CONFIG = {"displaylogo": False, "responsive": True}


# Plotly's SVG renderer slows down past ~1,000 points per chart; WebGL does not.
WEBGL_ABOVE = 1_000
# Points a chart draws per series at most; longer series are decimated server-side.
MAX_POINTS = 1_500
CHANGE_COLORS = {"perf-regression": "#d62728", "perf-improvement": "#2ca02c",
                 "correctness-failure": "#9467bd", "numerics-drift": "#ff7f0e"}
EVENT_COLOR = "#7f7f7f"  # a benchmark-files event: the benchmark changed there, not a verdict on the kernel
# Series colours: Plotly's palette without its reds and greens, which mark regressions and improvements.
SERIES_COLORS = ("#636efa", "#ab63fa", "#ffa15a", "#19d3f3", "#8c564b", "#ff97ff", "#fecb52", "#7f7f7f")


def sparkline_svg(values: Sequence[float | None], width: int = 120, height: int = 26,
                  stroke: str = "#3b6fb6") -> Markup:
    """An inline SVG polyline of ``values`` (oldest first), the latest point dotted; gaps skipped.

    Plain markup, no script: a table of a thousand rows stays cheap to render. Built from numbers
    only, so it is :class:`~markupsafe.Markup` for the template.
    """
    known = [(i, v) for i, v in enumerate(values) if v is not None]
    head = (f'<svg class="spark" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{len(known)} points">')
    if not known:
        return Markup(head + "</svg>")
    low, high = min(v for _, v in known), max(v for _, v in known)
    span = (high - low) or 1.0
    step = (width - 4) / max(len(values) - 1, 1)

    def xy(i: int, v: float) -> tuple[float, float]:
        # 2 px inset so the end dot is not clipped; a flat series sits in the middle.
        y = height / 2 if high == low else 2 + (height - 4) * (high - v) / span
        return 2 + i * step, y

    coords = [xy(i, v) for i, v in known]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
    x, y = coords[-1]
    return Markup(head + f'<polyline fill="none" stroke="{stroke}" stroke-width="1.5" points="{line}"/>'
                  f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2" fill="{stroke}"/></svg>')


def decimate(values: Sequence[float | None], keep: Collection[int] = (), max_points: int = MAX_POINTS) -> list[int]:
    """Indices of the points to draw, at most ``max_points`` (unless ``keep`` alone is more).

    Largest-triangle-three-buckets between anchors that are always drawn: the ends, ``keep``
    (the commits where changes are marked) and outliers (``roofwatch.dashboard.downsampling``).
    """
    return downsample(values, keep, max_points)


@dataclass(frozen=True)
class Series:
    """One line on the benchmark chart: its points (oldest first) and their values in base units."""

    name: str
    benchmark_id: int
    points: list[dict[str, Any]]
    values: list[float | None]
    baseline: bool = False


@dataclass(frozen=True)
class Drawn:
    name: str
    drawn: int
    measured: int


def commit_axis(series: Sequence[Series]) -> list[dict[str, Any]]:
    """Every commit any series measured, oldest first: the shared x axis (x = position)."""
    commits: dict[int, dict[str, Any]] = {}
    for s in series:
        for p in s.points:
            commits.setdefault(p["commit_id"], p)
    # Branch order, as the queries give it; unplaced commits first.
    return sorted(commits.values(), key=lambda p: (p.get("position") is not None, p.get("position") or 0,
                                                   p["commit_id"]))


def _hover(point: dict[str, Any], label: str) -> str:
    # Plotly reads hover text as HTML-ish markup: an author's "<me@example.com>" must stay text.
    title = plotly_text((point["title"] or "")[:80])
    author = plotly_text(point["author"] or "")
    return f"<b>{plotly_text(point['sha'][:12])}</b> {title}<br>{author}<br>{plotly_text(label)}"


def _series_traces(s: Series, x_of: dict[int, int], keep_commits: set[int], metric: Metric,
                   max_points: int, color: str) -> tuple[list[dict[str, Any]], Drawn]:
    """The series' trace in the upper panel, and its % of roofline trace for the lower one if it has any."""
    keep = [i for i, p in enumerate(s.points) if p["commit_id"] in keep_commits]
    shown = decimate(s.values, keep, max_points)
    points = [s.points[i] for i in shown]
    ys = [None if (v := s.values[i]) is None else v * metric.scale for i in shown]
    common: dict[str, Any] = {
        "type": "scattergl" if len(shown) > WEBGL_ABOVE else "scatter",
        "x": [x_of[p["commit_id"]] for p in points], "customdata": [p["run_id"] for p in points],
        "legendgroup": plotly_text(s.name), "mode": "lines+markers" if len(shown) <= 300 else "lines",
        # One colour per series in both panels, so its % of roofline reads as the same line.
        "line": {"color": color, "dash": "dash" if s.baseline else "solid"},
    }
    traces = [{**common, "name": plotly_text(s.name), "y": ys, "xaxis": "x", "yaxis": "y", "hoverinfo": "text", "hovertext": [
        _hover(p, f"{s.name}: {y:.4g} {metric.unit}" if y is not None else s.name) for p, y in zip(points, ys)]}]
    roofline = [None if p["roofline_fraction"] is None else 100 * p["roofline_fraction"] for p in points]
    if any(r is not None for r in roofline):
        # The commit is in the upper panel's hover; repeating it per point here would double the page.
        # The name reaches the template through ``meta``: written into it, a "%{y}" in a name would be a field.
        traces.append({**common, "name": plotly_text(f"{s.name} % roofline"), "y": roofline, "showlegend": False,
                       "xaxis": "x2", "yaxis": "y2", "meta": plotly_text(s.name),
                       "hovertemplate": "%{y:.1f} % of roofline<extra>%{meta}</extra>"})
    return traces, Drawn(s.name, len(shown), len(s.points))


def _change_label(change: dict[str, Any], devices: int, metric: Metric) -> str:
    # In the metric the chart plots: a regression of a bandwidth line reads "bandwidth −50.1 %",
    # the way the line moves, never the "+100 %" of its time.
    said = change_text(change["change_pct"], metric.kind)
    pct = f" {said}" if said else ""
    where = f" on {change['device_class']}" if devices > 1 else ""
    state = f" · {change['state']}" if change["state"] in CLOSED_STATES else ""
    return f"{change['kind']}{pct}{where}{state}"


def _change_marks(series: Sequence[Series], changes: Sequence[dict[str, Any]], x_of: dict[int, int],
                  metric: Metric) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Per change at its first bad commit: a vertical line over both panels (dotted once triaged), a
    label, and a marker on its point. Returns (shapes, annotations, marker traces)."""
    devices = len({c["device_class"] for c in changes})
    by_point = {(s.benchmark_id, p["commit_id"]): (p, v) for s in series for p, v in zip(s.points, s.values)}
    shapes, annotations = [], []
    marks: dict[str, list[Any]] = {"x": [], "y": [], "hovertext": [], "customdata": [], "color": [], "symbol": []}
    for change in changes:
        x = x_of.get(change["commit_id"]) if change["commit_id"] is not None else None
        if x is None:
            continue
        color = CHANGE_COLORS.get(change["kind"], "#555")
        triaged = change["state"] in CLOSED_STATES
        label = _change_label(change, devices, metric)
        shapes.append({"type": "line", "x0": x, "x1": x, "xref": "x", "y0": 0, "y1": 1, "yref": "paper",
                       "line": {"color": color, "width": 1, "dash": "dot" if triaged else "dash"},
                       "opacity": 0.5 if triaged else 0.9})
        annotations.append({"x": x, "y": 1, "xref": "x", "yref": "paper", "yanchor": "bottom", "showarrow": False,
                            "text": plotly_text(label), "font": {"color": color, "size": 11}, "opacity": 0.6 if triaged else 1.0})
        point, value = by_point.get((change["benchmark_id"], change["commit_id"]), (None, None))
        if point is None or value is None:
            continue
        for key, item in (("x", x), ("y", value * metric.scale), ("hovertext", _hover(point, label)),
                          ("customdata", point["run_id"]), ("color", color),
                          ("symbol", "circle-open" if triaged else "x")):
            marks[key].append(item)
    traces = [{
        "type": "scatter", "name": "detected changes", "mode": "markers", "hoverinfo": "text", "xaxis": "x",
        "yaxis": "y", "x": marks["x"], "y": marks["y"], "hovertext": marks["hovertext"],
        "customdata": marks["customdata"],
        "marker": {"color": marks["color"], "symbol": marks["symbol"], "size": 12, "line": {"width": 2}},
    }] if marks["x"] else []
    return shapes, annotations, traces


def _event_marks(events: Sequence[dict[str, Any]], x_of: dict[int, int]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per benchmark-files event: a grey dotted line over both panels and its label at the foot of the chart."""
    shapes, annotations = [], []
    for event in events:
        x = x_of.get(event["commit_id"])
        if x is None:
            continue
        shapes.append({"type": "line", "x0": x, "x1": x, "xref": "x", "y0": 0, "y1": 1, "yref": "paper",
                       "line": {"color": EVENT_COLOR, "width": 1, "dash": "dot"}, "opacity": 0.9})
        annotations.append({"x": x, "y": 0, "xref": "x", "yref": "paper", "yanchor": "bottom", "xanchor": "left",
                            "showarrow": False, "text": plotly_text(event["label"]),
                            "font": {"color": EVENT_COLOR, "size": 10}})
    return shapes, annotations


def _ticks(commits: Sequence[dict[str, Any]], most: int = 12) -> tuple[list[int], list[str]]:
    step = max(1, -(-len(commits) // most))
    positions = list(range(0, len(commits), step))
    return positions, [plotly_text(commits[i]["sha"][:7]) for i in positions]


@lru_cache(maxsize=1)
def _template() -> dict[str, Any]:
    template: dict[str, Any] = pio.templates["plotly_white"].to_plotly_json()
    return template


def _axes(panels: int, commits: Sequence[dict[str, Any]], metric: Metric) -> dict[str, Any]:
    """Stacked panels (upper 68 %) sharing one commit axis: zooming one zooms both."""
    tickvals, ticktext = _ticks(commits)
    commit_axis = {"tickvals": tickvals, "ticktext": ticktext, "range": [-0.5, max(len(commits) - 0.5, 0.5)]}
    bottom = {**commit_axis, "title": {"text": "commit (oldest → newest)"}}
    if panels == 1:
        return {"xaxis": {**bottom, "anchor": "y"},
                "yaxis": {"anchor": "x", "title": {"text": plotly_text(metric.axis_title)}, "rangemode": "tozero"}}
    return {
        "xaxis": {**commit_axis, "anchor": "y", "matches": "x2", "showticklabels": False},
        "xaxis2": {**bottom, "anchor": "y2"},
        "yaxis": {"anchor": "x", "domain": [0.345, 1.0], "title": {"text": plotly_text(metric.axis_title)},
                  "rangemode": "tozero"},
        "yaxis2": {"anchor": "x2", "domain": [0.0, 0.295], "title": {"text": "% of roofline"}, "rangemode": "tozero"},
    }


def benchmark_figure(series: Sequence[Series], changes: Sequence[dict[str, Any]], metric: Metric,
                     max_points: int | None = None,
                     events: Sequence[dict[str, Any]] = ()) -> tuple[dict[str, Any], list[Drawn]]:
    """Two panels on one commit axis — the metric per series, % of roofline below — changes marked.

    ``events``: benchmark-files events (``commit_id``, ``label``), each a grey dotted line; its
    point is always drawn, as a change's is.

    Without any % of roofline (no device peaks known) the lower panel would be an empty box, so the
    figure is the upper panel alone. Points carry their run id as ``customdata`` so a click can open
    the run. Built as plain dicts: graph_objects would validate every array element, about 100 ms
    for a few series of 1,500 points, on each request.
    """
    commits = commit_axis(series)
    x_of = {c["commit_id"]: i for i, c in enumerate(commits)}
    keep_commits = {c["commit_id"] for c in [*changes, *events] if c["commit_id"] is not None}
    colors = [SERIES_COLORS[i % len(SERIES_COLORS)] for i in range(len(series))]
    built = [_series_traces(s, x_of, keep_commits, metric, max_points or MAX_POINTS, color)
             for s, color in zip(series, colors)]
    panels = 2 if any(len(traces) > 1 for traces, _ in built) else 1
    shapes, annotations, marks = _change_marks(series, changes, x_of, metric)
    event_shapes, event_annotations = _event_marks(events, x_of)
    shapes, annotations = [*event_shapes, *shapes], [*event_annotations, *annotations]
    layout = {
        "height": 560 if panels == 2 else 400, "margin": {"l": 60, "r": 20, "t": 30, "b": 50},
        "hovermode": "closest", "template": _template(), "legend": {"orientation": "h", "y": -0.12},
        "meta": {"commits": len(commits)}, "shapes": shapes, "annotations": annotations,
        **_axes(panels, commits, metric),
    }
    data = [trace for traces, _ in built for trace in traces] + marks
    return {"data": data, "layout": layout}, [counts for _, counts in built]
