"""What an A/B verdict rests on: each round's value for base and head, side by side and paired.

Rows in, figure dict out: no database, no HTTP. Each round ran base and head in fresh processes,
one after the other, so round *i*'s two values share whatever the machine was doing then. The
left panel shows the two samples (a box over every value); the right one joins base → head
within each round, which is what the paired test looks at: a verdict holds when the lines lean
the same way, whatever the spread of the boxes. Traces carry a ``meta`` role (``base``,
``head``, ``pairs``) for tests and scripts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from roofwatch.dashboard.escaping import plotly_text

BASE_COLOR = "#6e7781"
HEAD_COLOR = "#0969da"
WORSE_COLOR = "#cf222e"
BETTER_COLOR = "#1a7f37"


def time_scale(values: Sequence[float], unit: str) -> tuple[float, str]:
    """Multiplier and unit that read best for these values; only seconds are rescaled."""
    if unit != "s":
        return 1.0, unit
    largest = max((abs(v) for v in values), default=0.0)
    for scale, name in ((1.0, "s"), (1e3, "ms"), (1e6, "µs")):
        if largest * scale >= 1.0:
            return scale, name
    return 1e9, "ns"


def _box(side: str, values: Sequence[float], scale: float, unit: str, color: str) -> dict[str, Any]:
    return {
        "type": "box", "meta": side, "name": side, "x": [side] * len(values), "y": [v * scale for v in values],
        "boxpoints": "all", "jitter": 0.35, "pointpos": 0, "marker": {"color": color, "size": 6},
        "line": {"color": color}, "fillcolor": "rgba(0,0,0,0)", "xaxis": "x", "yaxis": "y",
        "text": [f"round {i + 1}" for i in range(len(values))],
        "hovertemplate": f"%{{text}}: %{{y:.4g}} {unit}<extra>{side}</extra>",
    }


def _pairs(label: str, rounds: list[tuple[int, float, float]], scale: float, unit: str,
           color: str) -> dict[str, Any]:
    """One trace for many rounds: segments base → head separated by ``None``."""
    xs: list[str | None] = []
    ys: list[float | None] = []
    text: list[str] = []
    for index, base, head in rounds:
        change = f"{100 * (head / base - 1):+.1f}%" if base else "n/a"
        xs += ["base", "head", None]
        ys += [base * scale, head * scale, None]
        hover = f"round {index + 1}: {base * scale:.4g} → {head * scale:.4g} {unit} ({change})"
        text += [hover, hover, ""]
    return {
        "type": "scatter", "mode": "lines+markers", "meta": "pairs", "name": label, "x": xs, "y": ys,
        "xaxis": "x2", "yaxis": "y2", "line": {"color": color, "width": 1.5}, "marker": {"color": color, "size": 5},
        "text": text, "hoverinfo": "text",
    }


def distribution_figure(base: Sequence[float], head: Sequence[float], unit: str = "s",
                        higher_is_better: bool = False) -> dict[str, Any]:
    """Box-and-points of every round per side, and the rounds paired base → head.

    Rounds are paired by position; a side with extra rounds (never written by the A/B worker,
    which pairs them) keeps its extra values in its box but has no line.
    """
    scale, shown_unit = time_scale([*base, *head], unit)
    shown_unit = plotly_text(shown_unit)  # the benchmark's own unit when it is not seconds: the suite's text
    worse: list[tuple[int, float, float]] = []
    better: list[tuple[int, float, float]] = []
    for index, (b, h) in enumerate(zip(base, head)):
        got_worse = h < b if higher_is_better else h > b
        (worse if got_worse else better).append((index, b, h))
    data = [_box("base", base, scale, shown_unit, BASE_COLOR), _box("head", head, scale, shown_unit, HEAD_COLOR)]
    if worse:
        data.append(_pairs("head worse in round", worse, scale, shown_unit, WORSE_COLOR))
    if better:
        data.append(_pairs("head same or better in round", better, scale, shown_unit, BETTER_COLOR))
    direction = "higher is better" if higher_is_better else "lower is better"
    categories = {"type": "category", "categoryorder": "array", "categoryarray": ["base", "head"]}
    return {"data": data, "layout": {
        "template": "plotly_white", "height": 260, "showlegend": False, "margin": {"l": 60, "r": 10, "t": 24, "b": 30},
        "xaxis": {**categories, "domain": [0, 0.46]},
        "xaxis2": {**categories, "domain": [0.54, 1], "anchor": "y2"},
        "yaxis": {"title": {"text": f"{shown_unit} ({direction})"}},
        "yaxis2": {"anchor": "x2", "matches": "y"},
        "annotations": [
            {"text": "every round", "x": 0.23, "y": 1.08, "xref": "paper", "yref": "paper", "showarrow": False},
            {"text": "paired by round", "x": 0.77, "y": 1.08, "xref": "paper", "yref": "paper", "showarrow": False},
        ],
    }}
