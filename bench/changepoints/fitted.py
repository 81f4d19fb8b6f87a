"""The scanning oracle told everything but the drift's curve: the curve fitted, as any detector must.

The scanning oracle (``scanning.py``) is told each history's noise model, and for a drifting history that
model is the drift's very curve: it takes the curve off and segments what is left. No detector is told a
curve. This scanner is the scanning oracle on every other kind; on a drifting history it is told the
jitter's σ, and that the series may drift, but not how: for each count of changes K = 0..``MAX_CHANGES``
it takes the segmentation and curve of the highest gaussian likelihood, the curve one of none, a line, a
sinusoid of any of ``PERIODS`` commits, or a settling warm-up of any of ``TIME_CONSTANTS`` — each fitted
by least squares jointly with the segments' levels (amplitude, and phase for a sinusoid). A segmentation
and a curve are found together by backfitting (the best K changes of the series less the curve, by
segment neighbourhood, then curve and levels fitted again jointly, ``ROUNDS`` times), from two starts: the
curve fitted alone first, and the steps found alone first; each count's best sinusoid period or warm-up
time constant is then refined between its grid neighbours. Backfitting is a local search: the best
segmentation it finds can fall short of the true one's best fit (docs/analysis.md says how often).

Its penalty per change is calibrated as the scanning oracle's is, on change-free drifting histories of
``ceiling.CALIBRATION_SEED``'s stream, to ``ceiling.FALSE_ALARMS`` detections per history — per noise
level, not per shape, since the shape is what it is not told. What it finds on drifting histories against
the scanning oracle is what knowing the curve is worth, and what roofwatch, which must fit the curve too,
is fairly measured against there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import optimize

from bench.changepoints import histories as generator
from bench.changepoints import scanning
from bench.changepoints.ceiling import CALIBRATION_SEED, CALIBRATION_SERIES, FALSE_ALARMS, map_processes, model_of
from bench.changepoints.histories import History

MIN_SIDE = scanning.MIN_SIDE
MAX_CHANGES = scanning.MAX_CHANGES  # changes read per drifting history, scored or calibrated (the generator makes ≤ 3)
PERIODS = np.geomspace(40.0, 260.0, 16)  # commits: the sinusoids tried (the generator's run 50-200)
TIME_CONSTANTS = np.geomspace(6.0, 90.0, 10)  # commits: the warm-ups tried (the generator's settle in 10-60)
ROUNDS = 3  # of backfitting from each start

Penalties = dict[float, float]  # noise level -> nats per change on drifting histories


CURVES: tuple[tuple[str, float], ...] = (("none", 0.0), ("line", 0.0), *(("sinusoid", p) for p in PERIODS),
                                         *(("warm-up", tau) for tau in TIME_CONSTANTS))  # (shape, parameter) tried


def columns(shape: str, parameter: float, n: int) -> np.ndarray:
    """A curve's columns for ``n`` commits (its amplitudes, and a sinusoid's phase, are fitted): nothing, a line, a
    sinusoid of ``parameter`` commits' period, or a warm-up settling with time constant ``parameter`` (centred, so
    the segments' levels keep the mean)."""
    t = np.arange(n, dtype=float)
    if shape == "none":
        return np.zeros((n, 0))
    if shape == "line":
        return ((t - t.mean()) / n)[:, None]
    if shape == "sinusoid":
        return np.column_stack([np.sin(2 * np.pi * t / parameter), np.cos(2 * np.pi * t / parameter)])
    if shape == "warm-up":
        settling = np.exp(-t / parameter)
        return (settling - settling.mean())[:, None]
    raise ValueError(f"unknown curve {shape!r}")


def _between(grid: np.ndarray, value: float) -> tuple[float, float]:
    """The grid's neighbours either side of ``value`` (a grid point), one ratio beyond at its ends."""
    i = int(np.argmin(np.abs(grid - value)))
    ratio = float(grid[1] / grid[0])
    return (float(grid[i - 1]) if i > 0 else value / ratio), (float(grid[i + 1]) if i + 1 < len(grid) else value * ratio)


def segment_likelihoods(r: np.ndarray, sigma: float, min_side: int = MIN_SIDE) -> np.ndarray:
    """``L[i, j]``: the gaussian log-likelihood (σ known, constants dropped) of ``r[i:j]`` about its own mean; -inf
    for a stretch shorter than ``min_side``."""
    n = len(r)
    ones, squares = np.concatenate([[0.0], np.cumsum(r)]), np.concatenate([[0.0], np.cumsum(r * r)])
    i, j = np.arange(n + 1)[:, None], np.arange(n + 1)[None, :]
    length = (j - i).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        within = (squares[j] - squares[i]) - (ones[j] - ones[i]) ** 2 / length
    out = -0.5 * within / sigma ** 2
    out[length < min_side] = -np.inf
    return out


def best_segmentations(likelihoods: np.ndarray, max_changes: int) -> list[list[int]]:
    """The changes of the likeliest segmentation with exactly K changes, for K = 0..``max_changes`` (segment
    neighbourhood, Auger & Lawrence 1989; an empty list where none exists)."""
    n = likelihoods.shape[0] - 1
    ending = [likelihoods[0].copy()]  # ending[K][j]: the best of the first j values with K changes
    starts: list[np.ndarray] = []
    for _ in range(max_changes):
        total = ending[-1][:, None] + likelihoods
        start = np.argmax(total, axis=0)
        starts.append(start)
        ending.append(total[start, np.arange(n + 1)])
    out: list[list[int]] = []
    for k in range(max_changes + 1):
        if not np.isfinite(ending[k][n]):
            out.append([])
            continue
        changes, j = [], n
        for start in reversed(starts[:k]):
            j = int(start[j])
            changes.append(j)
        out.append(sorted(changes))
    return out


def joint_fit(x: np.ndarray, curve_columns: np.ndarray, changes: Sequence[int], sigma: float
              ) -> tuple[float, np.ndarray]:
    """The gaussian log-likelihood of ``x`` with a level per segment between ``changes`` and the curve
    ``curve_columns`` fitted jointly by least squares, and the fitted curve."""
    n = len(x)
    bounds = [0, *changes, n]
    levels = np.zeros((n, len(bounds) - 1))
    for s, (a, b) in enumerate(zip(bounds, bounds[1:])):
        levels[a:b, s] = 1.0
    design = np.column_stack([levels, curve_columns])
    beta, *_ = np.linalg.lstsq(design, x, rcond=None)
    residual = x - design @ beta
    return -0.5 * float(residual @ residual) / sigma ** 2, curve_columns @ beta[levels.shape[1]:]


def _backfit(x: np.ndarray, curve_columns: np.ndarray, sigma: float, max_changes: int
             ) -> list[tuple[float, list[int]]]:
    """Per K, the likeliest (log-likelihood, changes) backfitting reaches with the curve ``curve_columns``."""
    if curve_columns.shape[1] == 0:
        segmentations = best_segmentations(segment_likelihoods(x, sigma), max_changes)
        return [(joint_fit(x, curve_columns, s, sigma)[0] if s or k == 0 else -np.inf, s)
                for k, s in enumerate(segmentations)]
    alone, alone_curve = joint_fit(x, curve_columns, [], sigma)
    best: list[tuple[float, list[int]]] = [(alone, []), *[(-np.inf, [])] * max_changes]
    for start in (alone_curve, np.zeros(len(x))):  # the curve first; the steps first
        curve = [start] * (max_changes + 1)
        for _ in range(ROUNDS):
            found: dict[int, list[list[int]]] = {}  # per curve (by identity): its segmentations, read once
            for k in range(1, max_changes + 1):
                if id(curve[k]) not in found:
                    found[id(curve[k])] = best_segmentations(segment_likelihoods(x - curve[k], sigma), max_changes)
                changes = found[id(curve[k])][k]
                likelihood, curve[k] = joint_fit(x, curve_columns, changes, sigma)
                if changes and likelihood > best[k][0]:
                    best[k] = (likelihood, changes)
    return best


def fits(log_values: np.ndarray, sigma: float, max_changes: int = MAX_CHANGES) -> list[tuple[float, list[int]]]:
    """Per K = 0..``max_changes``: the log-likelihood and changes of the likeliest segmentation beside any curve.

    Every curve of ``CURVES`` is tried; then each K's best sinusoid's period or warm-up's time constant is refined
    between its grid neighbours (a period a few percent off leaves a slow wave a detector would take for steps),
    and backfitting is run again from the refined curve.
    """
    x = log_values - log_values.mean()
    n = len(x)
    best: list[tuple[float, list[int], tuple[str, float]]] = [(-np.inf, [], ("none", 0.0))] * (max_changes + 1)

    def offer(shape: str, parameter: float) -> None:
        for k, (likelihood, changes) in enumerate(_backfit(x, columns(shape, parameter, n), sigma, max_changes)):
            if likelihood > best[k][0]:
                best[k] = (likelihood, changes, (shape, parameter))

    for shape, parameter in CURVES:
        offer(shape, parameter)
    for _likelihood, changes, (shape, parameter) in list(best):
        if shape in ("sinusoid", "warm-up"):
            low, high = _between(PERIODS if shape == "sinusoid" else TIME_CONSTANTS, parameter)
            refined = optimize.minimize_scalar(
                lambda p, changes=changes, shape=shape: -joint_fit(x, columns(shape, p, n), changes, sigma)[0],
                bounds=(low, high), method="bounded", options={"xatol": 1e-3 * parameter})
            offer(shape, float(refined.x))
    return [(likelihood, changes) for likelihood, changes, _curve in best]


def gains(fitted: Sequence[tuple[float, list[int]]]) -> np.ndarray:
    """What each count of changes gains over none (``fits``), as ``scanning.gains_by_count`` gives it."""
    return np.array([likelihood for likelihood, _ in fitted]) - fitted[0][0]


def _fits_of(history: History) -> list[tuple[float, list[int]]]:
    return fits(np.log(history.values), model_of(history).sigma)


def penalties(processes: int = 1, series: int = CALIBRATION_SERIES, seed: int = CALIBRATION_SEED) -> Penalties:
    """The penalty per noise level at ``FALSE_ALARMS`` per change-free drifting history, its curve fitted."""
    out: Penalties = {}
    for noise in generator.NOISE_LEVELS:
        clean = generator.clean_cell("drift", noise, series, seed)
        out[noise] = scanning.calibrate(np.array([gains(f) for f in map_processes(_fits_of, clean, processes)]),
                                        FALSE_ALARMS)
    return out


def detect(history: History, penalties_: Sequence[float]) -> list[list[int]]:
    """A drifting history's changes at each of ``penalties_``, its curve fitted (most of the work, done once)."""
    fitted = _fits_of(history)
    gained = gains(fitted)
    return [fitted[int(scanning.changes_at(gained, p))][1] for p in penalties_]


def _detect(task: tuple[History, list[float]]) -> list[list[int]]:
    return detect(*task)


def detections(histories: Sequence[History], told: scanning.Penalties, fitted: Penalties,
               multipliers: Sequence[float] = (1.0,), processes: int = 1) -> list[list[list[int]]]:
    """Each history's changes at each of ``multipliers`` × its penalty: a drifting one's with its curve fitted
    (``fitted``), any other's under its told noise, as the scanning oracle finds them (``told``)."""
    drifting = [i for i, h in enumerate(histories) if h.kind == "drift"]
    rest = [i for i, h in enumerate(histories) if h.kind != "drift"]
    out: list[list[list[int]]] = [[] for _ in histories]
    tasks = [(histories[i], [m * fitted[histories[i].noise] for m in multipliers]) for i in drifting]
    for i, found in zip(drifting, map_processes(_detect, tasks, processes)):
        out[i] = found
    for i, found in zip(rest, scanning.detections([histories[i] for i in rest], told, multipliers, processes)):
        out[i] = found
    return out
