"""A detector told the noise, not the steps: optimal partitioning under each history's true noise model.

The true-model oracles of ``ceiling.py`` are told where every step's neighbours are, which no detector
knows, so a share of their recall mixes two things: what the noise hides and what finding the neighbours
costs. This one is told only the density that made the history (``histories.NoiseModel``: a Student-t's
degrees of freedom, a busy neighbour's rate and slowdown, an autotuner's gap and share, a GPU's slow
band, the drift's very curve) and must find the steps itself, as a detector does.

It segments each history by optimal partitioning (Jackson et al. 2005): the segmentation that maximises
the profile log-likelihood under that density, each segment's level its own, less ``penalty`` nats per
change, every segment at least ``MIN_SIDE`` commits — solved exactly by dynamic programming over all
stretches. The penalty is calibrated as the detecting oracle's threshold is, on change-free histories of
``ceiling.CALIBRATION_SEED``'s own stream (never a scored one), per kind, sub-kind and noise level: the
smallest penalty under which they carry ``ceiling.FALSE_ALARMS`` detections per history on average, the
goals' own count of false alarms. A ``multiplier`` above 1 holds it to fewer, for precision.

Scored like any detector, what it reaches on the same histories is what knowing the noise is worth: the
part of a goal it cannot reach no detector reaches by scanning under this penalty, and the part it reaches
that roofwatch does not is what roofwatch loses by estimating the noise from the series itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bench.changepoints import histories as generator
from bench.changepoints.ceiling import (
    CALIBRATION_SEED,
    CALIBRATION_SERIES,
    DETECT_MIN_SIDE,
    FALSE_ALARMS,
    map_processes,
    model_of,
    per_cell,
)
from bench.changepoints.histories import History
from bench.changepoints.likelihood import best_level, profile

MIN_SIDE = DETECT_MIN_SIDE  # commits of the shortest segment, as the detecting oracle's sides
MAX_CHANGES = 4  # changes a change-free history's segmentations are read up to, when its penalty is calibrated
PENALTY_TOLERANCE = 1e-3  # nats: the calibration's bisection stops this close to the penalty that spends the budget

Penalties = dict[tuple[str, str, float], float]  # (kind, sub-kind, noise level) -> nats per change


def stretch_likelihoods(log_values: np.ndarray, model: generator.NoiseModel, min_side: int = MIN_SIDE) -> np.ndarray:
    """``L[i, j]``: the profile log-likelihood of ``log_values[i:j]`` as one level under ``model``; -inf for a
    stretch shorter than ``min_side``."""
    n = len(log_values)
    prefix = profile(log_values, model, 0, n)
    out = np.full((n + 1, n + 1), -np.inf)
    for i in range(n - min_side + 1):
        ends = np.arange(i + min_side, n + 1)
        out[i, ends] = best_level(prefix[:, ends] - prefix[:, i:i + 1])
    return out


def partition(likelihoods: np.ndarray, penalty: float) -> list[int]:
    """The changes (first index after each) of the segmentation maximising Σ segment likelihood − ``penalty`` per
    change: optimal partitioning over ``likelihoods`` (``stretch_likelihoods``)."""
    n = likelihoods.shape[0] - 1
    best = np.full(n + 1, -np.inf)  # best[j]: the best segmentation of the first j values, penalties taken
    best[0] = penalty  # the first segment starts no change: its penalty is given back
    start = np.zeros(n + 1, dtype=int)
    for j in range(1, n + 1):
        value = best[:j] + likelihoods[:j, j] - penalty
        i = int(np.argmax(value))
        best[j], start[j] = value[i], i
    changes: list[int] = []
    j = n
    while j > 0 and np.isfinite(best[j]):
        j = int(start[j])
        if j > 0:
            changes.append(j)
    return sorted(changes)


def gains_by_count(likelihoods: np.ndarray, max_changes: int = MAX_CHANGES) -> np.ndarray:
    """For K = 0..``max_changes``, the log-likelihood the best segmentation with exactly K changes gains over none
    (segment neighbourhood, Auger & Lawrence 1989); -inf where no such segmentation exists."""
    n = likelihoods.shape[0] - 1
    ending = likelihoods[0].copy()  # ending[j]: the best segmentation of the first j values with K changes
    none = ending[n]
    out = [0.0]
    for _ in range(max_changes):
        ending = (ending[:, None] + likelihoods).max(axis=0)
        out.append(float(ending[n] - none))
    return np.array(out)


def changes_at(gains: np.ndarray, penalty: float) -> np.ndarray:
    """How many changes optimal partitioning reports at ``penalty``, for each row of ``gains`` (``gains_by_count``)."""
    return np.argmax(gains - penalty * np.arange(gains.shape[-1]), axis=-1)


def calibrate(gains: np.ndarray, budget: float = FALSE_ALARMS) -> float:
    """The smallest penalty under which change-free histories with these ``gains`` (one row each) carry ``budget``
    changes each on average (bisection: the count only falls as the penalty rises)."""
    low, high = 0.0, 1.0
    while changes_at(gains, high).mean() > budget:
        low, high = high, 2 * high
    while high - low > PENALTY_TOLERANCE:
        middle = (low + high) / 2
        low, high = (middle, high) if changes_at(gains, middle).mean() > budget else (low, middle)
    return high


def _cell_penalties(cell: tuple[str, float, int, int]) -> Penalties:
    kind, noise, series, seed = cell
    gains: dict[str, list[np.ndarray]] = {}
    for h in generator.clean_cell(kind, noise, series, seed):
        gains.setdefault(h.detail, []).append(gains_by_count(stretch_likelihoods(np.log(h.values), model_of(h))))
    return {(kind, detail, noise): calibrate(np.array(g)) for detail, g in gains.items()}


def penalties(processes: int = 1, series: int = CALIBRATION_SERIES, seed: int = CALIBRATION_SEED) -> Penalties:
    """The penalty of each kind, sub-kind and noise level at ``FALSE_ALARMS`` per change-free history."""
    return per_cell(_cell_penalties, processes, series, seed)


def detect(history: History, penalties_: Sequence[float]) -> list[list[int]]:
    """The changes optimal partitioning finds in ``history`` under its true noise model, at each of ``penalties_``
    (the stretches' likelihoods, most of the work, read once)."""
    likelihoods = stretch_likelihoods(np.log(history.values), model_of(history))
    return [partition(likelihoods, penalty) for penalty in penalties_]


def _detect(task: tuple[History, list[float]]) -> list[list[int]]:
    return detect(*task)


def detections(histories: Sequence[History], table: Penalties, multipliers: Sequence[float] = (1.0,),
               processes: int = 1) -> list[list[list[int]]]:
    """Each history's changes at its cell's penalty × each of ``multipliers``."""
    missing = {(h.kind, h.detail, h.noise) for h in histories} - set(table)
    if missing:
        raise ValueError(f"no penalty calibrated for {sorted(missing)}: calibrate on more change-free histories")
    tasks = [(h, [m * table[(h.kind, h.detail, h.noise)] for m in multipliers]) for h in histories]
    return map_processes(_detect, tasks, processes)
