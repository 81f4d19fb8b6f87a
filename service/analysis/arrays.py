"""numpy's median, quantiles and weighted mean of one small array, to the same bits, without their per-call cost.

A series' analysis asks for thousands of these on stretches of a few dozen to a few hundred values, where
``np.median``, ``np.quantile`` and ``np.average`` spend most of their time on dispatch and checks rather than on
the numbers: here each is one partition (or two sums) and the very arithmetic numpy does after it, so no change
point moves by a bit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def median(v: np.ndarray) -> float:
    """``np.median(v)`` (NaN when any value is): the middle value, or the mean of the middle two."""
    n = len(v)
    if n == 0 or not np.isfinite(v).all():
        return float(np.median(v))
    half = n // 2
    if n % 2:
        ordered = v.copy()  # np.partition's own copy, then its partition, without its dispatch
        ordered.partition(half)
        return float(ordered[half])
    ordered = v.copy()
    ordered.partition((half - 1, half))
    return (float(ordered[half - 1]) + float(ordered[half])) / 2


def quantiles(v: np.ndarray, q: Sequence[float]) -> list[float]:
    """``np.quantile(v, q)`` of finite values, by its default linear interpolation: the same order statistics and
    numpy's own interpolation between them (from the nearer one, as ``numpy.lib._function_base_impl._lerp``)."""
    last = len(v) - 1
    virtual = [last * float(p) for p in q]
    low = [min(int(math.floor(at)), last) for at in virtual]
    high = [min(i + 1, last) for i in low]
    ordered = v.copy()
    ordered.partition([*low, *high])
    out = []
    for at, i, j in zip(virtual, low, high):
        a, b, gamma = float(ordered[i]), float(ordered[j]), at - math.floor(at)
        out.append(b - (b - a) * (1 - gamma) if gamma >= 0.5 else a + (b - a) * gamma)
    return out


def weighted_mean(v: np.ndarray, w: np.ndarray) -> float:
    """``np.average(v, weights=w)``: the weighted sum over the weights' sum; weights that sum to zero are an error,
    as there."""
    total = float(np.add.reduce(w))  # w.sum() without its Python frame: the same reduction
    if total == 0.0:
        raise ZeroDivisionError("weights sum to zero, cannot be normalized")
    return float(np.add.reduce(v * w) / total)
