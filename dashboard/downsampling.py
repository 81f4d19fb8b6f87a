"""Which points of a long series to draw: largest-triangle-three-buckets, with anchors a reader must see.

Pure: lists of numbers in, indices out. A chart of 20,000 commits has ~1,000 pixels to draw them
in; what it must not lose is what a reader looks for in it — the steps where changes were
detected, and the runs far off their neighbours. So the indices come in two kinds:

- **anchors**, always drawn: the two ends, the points ``keep`` names (change markers), and
  outliers — points more than ``OUTLIER_SIGMAS`` robust standard deviations (1.4826 × the median
  absolute deviation) from the median of their ``OUTLIER_WINDOW`` neighbours;
- between consecutive anchors, points chosen by largest-triangle-three-buckets (Steinarsson,
  "Downsampling Time Series for Visual Representation", 2013, §4.2): the stretch is cut into
  equal-count buckets and each bucket gives the point that spans the largest triangle with the
  point chosen before it and the average of the next bucket. Unlike averaging or striding it keeps
  the shape — peaks, dips and the slope of a step — and unlike min/max pairs it spends one point
  per bucket.

Missing values (``None``: no work declared, a zero median) are never drawn once a series is
downsampled (unless kept); each stretch between anchors gets a share of the budget proportional to
its length.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

OUTLIER_WINDOW = 15
OUTLIER_SIGMAS = 6.0
MAD_TO_SIGMA = 1.4826


def outliers(values: np.ndarray, most: int) -> list[int]:
    """Indices (into ``values``, no NaN) of the ``most`` points farthest off their neighbours' median."""
    if len(values) < OUTLIER_WINDOW or most <= 0:
        return []
    half = OUTLIER_WINDOW // 2
    # The middle of each sorted window: np.median partitions row by row, 100× slower at this shape.
    local = np.sort(sliding_window_view(np.pad(values, half, mode="edge"), OUTLIER_WINDOW), axis=1)[:, half]
    residual = np.abs(values - local)
    scale = MAD_TO_SIGMA * float(np.median(residual))
    # A perfectly flat stretch has no spread: judge it against a relative floor, not zero.
    floor = 1e-9 * float(np.median(np.abs(values))) or 1e-300
    far = np.flatnonzero(residual > OUTLIER_SIGMAS * max(scale, floor))
    if len(far) > most:
        far = far[np.argsort(residual[far])[-most:]]
    return sorted(int(i) for i in far)


def lttb(x: np.ndarray, y: np.ndarray, start: int, stop: int, count: int) -> list[int]:
    """``count`` indices strictly between ``start`` and ``stop`` (both drawn already), by LTTB."""
    inner = stop - start - 1
    if count >= inner:
        return list(range(start + 1, stop))
    if count <= 0:
        return []
    edges = start + 1 + (np.arange(count + 1) * inner) // count
    offsets = edges[:-1] - start - 1
    sizes = np.diff(edges)
    # Each bucket is weighed against the average of the bucket after it (the last: the end anchor).
    next_x = np.append((np.add.reduceat(x[start + 1:stop], offsets) / sizes)[1:], x[stop]).tolist()
    next_y = np.append((np.add.reduceat(y[start + 1:stop], offsets) / sizes)[1:], y[stop]).tolist()
    bounds = edges.tolist()
    chosen: list[int] = []
    previous = start
    for b in range(count):
        lo, hi = bounds[b], bounds[b + 1]
        px, py = float(x[previous]), float(y[previous])
        # Twice the triangle's area; the constant factor does not change the argmax.
        area = np.abs((px - next_x[b]) * (y[lo:hi] - py) - (px - x[lo:hi]) * (next_y[b] - py))
        previous = lo + int(area.argmax())
        chosen.append(previous)
    return chosen


def downsample(values: Sequence[float | None], keep: Collection[int] = (), max_points: int = 1_500) -> list[int]:
    """Indices of the points to draw, sorted, at most ``max_points`` (unless the anchors alone are more).

    A series that fits is drawn whole, gaps included. ``keep`` are indices into ``values`` that
    must be drawn (where changes are marked).
    """
    count = len(values)
    if count <= max_points:
        return list(range(count))
    everything = np.array(values, dtype=float)  # None becomes NaN
    known = np.flatnonzero(~np.isnan(everything))
    anchors = {i for i in keep if 0 <= i < count}
    if len(known) == 0:
        return sorted(anchors)
    y = everything[known]
    x = known.astype(float)
    # Anchors as positions in ``known``: the ends, kept points that have a value, outliers.
    wanted = np.array(sorted(anchors), dtype=np.int64)
    at = np.searchsorted(known, wanted)
    valued = at < len(known)
    valued[valued] = known[at[valued]] == wanted[valued]
    fixed = {0, len(known) - 1} | set(at[valued].tolist()) | set(outliers(y, most=max_points // 4))
    ordered = sorted(fixed)
    budget = max_points - len(anchors | {int(known[k]) for k in ordered})
    inner = len(known) - len(ordered)
    chosen = set(ordered)
    if budget > 0 and inner > 0:
        for start, stop in zip(ordered, ordered[1:]):
            share = round(budget * (stop - start - 1) / inner)
            chosen.update(lttb(x, y, start, stop, share))
    picked = {int(known[k]) for k in chosen} | anchors
    if len(picked) > max_points:  # rounding of the shares: drop the surplus evenly, never an anchor
        spare = sorted(picked - anchors - {int(known[k]) for k in fixed})
        drop = set(spare[:: max(1, len(spare) // (len(picked) - max_points))][: len(picked) - max_points])
        picked -= drop
    return sorted(picked)
