"""Plotly figure builders: rows in, figure JSON out (no database, no HTTP)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from service.models import Benchmark

PLOT_CONFIG = {"displaylogo": False, "responsive": True}


def _time_unit(values: list[float]) -> tuple[float, str]:
    """Scale seconds to the unit that reads best for these values."""
    largest = max(values, default=0.0)
    for scale, unit in ((1.0, "s"), (1e3, "ms"), (1e6, "µs")):
        if largest * scale >= 1.0:
            return scale, unit
    return 1e9, "ns"


def trend(benchmark: Benchmark, points: list[dict[str, Any]], changes: list[dict[str, Any]]) -> dict[str, Any]:
    """Median time per commit with its IQR, % of roofline on a second axis, changes marked."""
    scale, unit = _time_unit([p["median"] for p in points])
    labels = [p["sha"][:8] for p in points]
    hover = [
        f"{p['sha'][:12]}<br>{(p['title'] or '')[:60]}<br>{p['author']}<br>"
        f"median {p['median'] * scale:.4g} {unit} (n={p['n']})"
        for p in points
    ]
    figure = go.Figure()
    figure.add_trace(go.Scatter(
        x=labels, y=[p["median"] * scale for p in points], mode="lines+markers", name="median",
        error_y={"type": "data", "array": [p["iqr"] * scale / 2 for p in points], "visible": True},
        hovertext=hover, hoverinfo="text", customdata=[p["run_id"] for p in points],
    ))
    if any(p["roofline_fraction"] is not None for p in points):
        figure.add_trace(go.Scatter(
            x=labels, y=[None if p["roofline_fraction"] is None else 100 * p["roofline_fraction"] for p in points],
            mode="lines", name="% of roofline", yaxis="y2", line={"dash": "dot"},
        ))
    by_sha = {p["sha"]: i for i, p in enumerate(points)}
    for change in changes:
        if change["commit"] in by_sha:
            index = by_sha[change["commit"]]
            color = "#2ca02c" if change["kind"] == "perf-improvement" else "#d62728"
            figure.add_vline(x=index, line={"color": color, "dash": "dash"})
            figure.add_annotation(x=labels[index], y=1, yref="paper", showarrow=False,
                                  text=f"{change['change_pct']:+.0f}%" if change["change_pct"] is not None
                                  else change["kind"], font={"color": color})
    figure.update_layout(
        margin={"l": 50, "r": 50, "t": 10, "b": 40}, height=280, showlegend=False,
        xaxis={"title": "commit", "type": "category"},
        yaxis={"title": f"time ({unit}, lower is better)", "rangemode": "tozero"},
        yaxis2={"title": "% of roofline", "overlaying": "y", "side": "right", "rangemode": "tozero",
                "showgrid": False},
        template="plotly_white",
    )
    return figure.to_plotly_json()
