"""How fast is this host now? A fixed NumPy workload shaped like the detector's, to tell a slower host from slower code.

Most of the detector's time is NumPy's per-call cost on arrays of a few hundred values (cumulative sums, small
matrix products, sorts, reductions), and that moves with the host: the same code, bit for bit, has taken 54.5 s and
98.2 s of CPU for the speed bench's full analysis on the same 2-core host on different days, and 60-70 s within one
hour. The workload here makes the same kinds of calls on the same sizes but never changes with roofwatch's code, so
its time is the host's: the speed bench runs it between slices of its analysis and between its new commits, and
scales its CPU times by how much slower or faster than ``REFERENCE_MS`` the workload ran meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

SERIES = 400  # series of the workload: about 0.14 s of CPU on the development host
POINTS = 500
REFERENCE_MS = 143.0  # CPU ms of one pass on the 2-core development host, 2026-11-29 22:10 UTC: the mean through
# three full runs of the speed bench, whose analysis took 64.4, 62.1 and 60.2 s of CPU and one new commit 0.94-0.98 s


def _one_series(y: np.ndarray, basis: np.ndarray) -> float:
    """The calls one series' analysis makes most: CUSUM splits, a small weighted regression, medians and a sort."""
    n = len(y)
    total = 0.0
    for width in (n, n // 2, n // 4, n // 8):
        for start in range(0, n - width + 1, max(width // 2, 1)):
            part = y[start:start + width]
            cumulative = np.cumsum(part)[:-1]
            k = np.arange(1, width)
            z = np.abs(cumulative / k - (cumulative[-1] + part[-1] - cumulative) / (width - k))
            total += float(z[int(np.argmax(z))])
    w = 1.0 / (1.0 + np.abs(y - np.median(y)))
    normal = basis.T @ (basis * w[:, None])
    coefficients = np.linalg.solve(normal + 1e-9 * np.eye(basis.shape[1]), basis.T @ (w * y))
    residuals = y - basis @ coefficients
    total += float(np.sort(np.abs(np.diff(residuals)))[n // 2])
    total += float(np.add.reduceat(residuals, np.arange(0, n, 25)).sum())
    return total


@lru_cache(maxsize=1)
def _inputs() -> tuple[np.ndarray, np.ndarray]:
    """The series (from a fixed seed) and the regression's columns: a level, a line, two warm-ups, two sinusoids."""
    series = np.random.default_rng(0).standard_normal((SERIES, POINTS))
    t = np.arange(POINTS) / POINTS
    basis = np.column_stack([np.ones(POINTS), t, np.exp(-np.arange(POINTS) / 12.0), np.exp(-np.arange(POINTS) / 36.0),
                             *(f(2 * np.pi * t * period) for period in (1.5, 3.0) for f in (np.sin, np.cos))])
    for array in (series, basis):
        array.flags.writeable = False
    return series, basis


def workload() -> tuple[float, float]:
    """One pass of the workload in this process: its CPU seconds, and a checksum of what it computed (the input is
    the same on every host and in every pass)."""
    series, basis = _inputs()
    start = time.process_time()
    checksum = sum(_one_series(y, basis) for y in series)
    return time.process_time() - start, checksum


def slowdown(seconds: Sequence[float]) -> float:
    """How much slower this host ran the workload, over the passes of ``seconds``, than the host ``REFERENCE_MS``
    was measured on (1.0: the same)."""
    return 1e3 * float(np.mean(seconds)) / REFERENCE_MS
