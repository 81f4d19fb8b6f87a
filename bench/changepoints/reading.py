"""A scanner told nothing: optimal partitioning under the noise model it reads from each history itself.

The scanning oracle (``scanning.py``) is told each history's true noise density and reaches the goals a
detector is held to; roofwatch, which reads the noise from the series, does not. Whether the gap is in
how roofwatch *finds* steps (candidates, local tests, growing) or in how it *reads* the noise is what
this scanner measures: the same optimal partitioning (Jackson et al. 2005) over the same stretch
likelihoods, under a model built from the series alone, starting from roofwatch's own reading of it:

1. **Steps and drift** — roofwatch's detected steps, and its drift choice (``drift.choose``) on the cleaned
   values with them; a chosen drift's curve, fitted beside the steps, is the model's trend.
2. **Density** — fitted to the residuals about each stretch's median: a normal; the likeliest Student-t
   (``DEGREES`` × a grid of scales); the likeliest half-t of the values above each stretch's floor; where
   values lie further than ``OUTLIER`` noise deviations, a busy neighbour's episodes (normal jitter and a
   slow or fast band as wide as they reach, at their share); where ``noise.read_noise`` reads two modes,
   normal jitter with the slow mode's share and a band of its offset ± ``BAND_SIGMAS`` of its spread.
   The reading is the one of these with the best BIC (Schwarz 1978) of the series' profile likelihood at
   roofwatch's steps, the very likelihood the scanner then maximises.

Its penalty per change is calibrated as the scanning oracle's is, on change-free histories of
``ceiling.CALIBRATION_SEED``'s stream, to ``ceiling.FALSE_ALARMS`` detections per history — but per
*reading* (what the scanner read, never the history's true kind), since a detector knows nothing else:
a reading seen on fewer than ``MIN_CALIBRATION`` histories takes the largest penalty of any.

Where it falls short of the scanning oracle, the reading is what was missing; where it beats roofwatch,
roofwatch's search is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

from bench.changepoints import histories as generator
from bench.changepoints.ceiling import CALIBRATION_SEED, CALIBRATION_SERIES, FALSE_ALARMS, map_processes
from bench.changepoints.histories import History, NoiseModel
from bench.changepoints.likelihood import best_level, profile
from bench.changepoints.scanning import calibrate, gains_by_count, partition, stretch_likelihoods
from roofwatch.service.analysis import drift
from roofwatch.service.analysis.changepoints import detect as roofwatch_detect
from roofwatch.service.analysis.noise import clean, read_noise, robust_sigma

OUTLIER = 5.0  # noise deviations from a stretch's median: a normal series of 200 commits has one this far in 10⁴
BAND_SIGMAS = 2.0  # a bimodal series' slow band: the slow mode's offset ± this many of its spread
BAND_MARGIN = 0.25  # an episode band reaches this much beyond its smallest and largest episode, relatively
DEGREES = (2.5, 3.0, 4.0, 6.0, 10.0)  # of freedom a Student-t or half-t reading is chosen from
SCALES = np.geomspace(0.5, 2.0, 25)  # × a first guess of the scale, the t scales tried
HALF_SCALES = np.geomspace(0.3, 3.0, 31)  # × the median of the values above their stretch's floor, the half-t scales
MIN_CALIBRATION = 30  # change-free histories a reading's own penalty needs
MIN_SIZE = 5  # commits each side of a step when roofwatch reads the series, as its detector's default

Penalties = dict[str, float]  # reading -> nats per change


def _stretches(n: int, steps: Sequence[int]) -> list[tuple[int, int]]:
    bounds = [0, *sorted(steps), n]
    return list(zip(bounds, bounds[1:]))


def _trend(x: np.ndarray, steps: list[int]) -> np.ndarray:
    """The drift roofwatch's choice would model beside ``steps`` (centred), or an empty array when it models none."""
    y, w = clean(x, read_noise(x, MIN_SIZE, steps))
    regression = drift.Regression(y, w)
    choice = drift.choose(regression, steps, steps)
    if choice.columns is None:
        return np.zeros(0)
    curve = regression.curve(choice.fit, choice.columns)
    return curve - curve.mean()


def _band(relative: np.ndarray) -> tuple[float, float]:
    """A uniform band covering these relative moves (all positive), with ``BAND_MARGIN`` to spare either side."""
    return max(float(relative.min()) * (1 - BAND_MARGIN), 1e-4), float(relative.max()) * (1 + BAND_MARGIN)


def _likeliest_t(values: np.ndarray, scales: np.ndarray) -> tuple[float, float, float]:
    """(log-likelihood, degrees of freedom, scale) of the likeliest Student-t of ``DEGREES`` × ``scales`` (a half-t's
    log-likelihood is more by log 2 per value, so the same pair is the likeliest half-t of values all above 0)."""
    best = (-math.inf, math.inf, float(scales[0]))
    for df in DEGREES:
        for scale in scales:
            ll = float(np.sum(stats.t.logpdf(values / scale, df))) - len(values) * math.log(scale)
            if ll > best[0]:
                best = (ll, df, float(scale))
    return best


def _profile_likelihood(x: np.ndarray, model: NoiseModel, stretches: list[tuple[int, int]]) -> float:
    """The log-likelihood of ``x`` under ``model``, each stretch at its likeliest level: what the scanner maximises."""
    prefix = profile(x, model, 0, len(x))
    return float(sum(best_level(prefix[:, [end]] - prefix[:, [start]])[0] for start, end in stretches))


def read(log_values: np.ndarray) -> tuple[NoiseModel, str]:
    """The noise model read from ``log_values``, and the reading's name (its density, "+drift" with a trend)."""
    x = np.asarray(log_values, dtype=float)
    n = len(x)
    steps = sorted(c.index for c in roofwatch_detect(np.exp(x)))
    trend = _trend(x, steps)
    z = x - trend if len(trend) else x
    drifting = "+drift" if len(trend) else ""
    stretches = _stretches(n, steps)
    residual = np.concatenate([z[s:e] - np.median(z[s:e]) for s, e in stretches])
    # each density fitted to the residuals, with its number of parameters (a searched one counts as a second)
    readings: list[tuple[str, NoiseModel, int]] = [
        ("normal", NoiseModel("normal", max(float(np.std(residual)), 1e-12), trend=trend), 1)]
    _ll, df, scale = _likeliest_t(residual, max(robust_sigma(residual), 1e-12) * SCALES)
    readings.append(("t", NoiseModel("t", scale, df=df, trend=trend), 3))
    above = np.concatenate([z[s:e] - z[s:e].min() for s, e in stretches])
    above = above[above > 0]
    _ll, df, scale = _likeliest_t(above, max(float(np.median(above)), 1e-12) * HALF_SCALES)
    readings.append(("half-t", NoiseModel("half-t", scale, df=df, trend=trend), 3))
    sigma = max(robust_sigma(z), 1e-12)
    slow, fast = residual > OUTLIER * sigma, residual < -OUTLIER * sigma
    if slow.any() or fast.any():
        slow_band = _band(np.expm1(residual[slow])) if slow.any() else (0.0, 0.0)
        fast_band = _band(-np.expm1(residual[fast])) if fast.any() else (0.0, 0.0)
        readings.append(("episodes", NoiseModel(
            "normal", sigma, slow_share=np.full(n, max(float(slow.mean()), 1 / n)) if slow.any() else np.zeros(0),
            slow_band=slow_band, fast_share=max(float(fast.mean()), 1 / n) if fast.any() else 0.0,
            fast_band=(fast_band[0], min(fast_band[1], 0.9)), trend=trend), 1 + 3 * int(slow.any()) + 3 * int(fast.any())))
    noise = read_noise(z, MIN_SIZE, steps)
    if noise.bimodal:
        low = max(noise.offset - BAND_SIGMAS * noise.slow_sigma, 0.0)
        high = noise.offset + BAND_SIGMAS * noise.slow_sigma
        readings.append(("bimodal", NoiseModel("normal", noise.sigma, slow_share=np.full(n, float(noise.slow.mean())),
                                               slow_band=(math.expm1(low), math.expm1(high)), trend=trend), 4))
    name, model, _parameters = max(
        readings, key=lambda r: _profile_likelihood(x, r[1], stretches) - r[2] * math.log(n) / 2)  # BIC
    return model, name + drifting


def _cell_gains(cell: tuple[str, float, int, int]) -> list[tuple[str, np.ndarray]]:
    kind, noise, series, seed = cell
    out = []
    for h in generator.clean_cell(kind, noise, series, seed):
        x = np.log(h.values)
        model, name = read(x)
        out.append((name, gains_by_count(stretch_likelihoods(x, model))))
    return out


def penalties(processes: int = 1, series: int = CALIBRATION_SERIES, seed: int = CALIBRATION_SEED
              ) -> tuple[Penalties, dict[str, int]]:
    """The penalty of each reading at ``FALSE_ALARMS`` per change-free history, and how many histories read so."""
    cells = [(kind, noise, series, seed) for kind in generator.KINDS for noise in generator.NOISE_LEVELS]
    gains: dict[str, list[np.ndarray]] = {}
    for part in map_processes(_cell_gains, cells, processes):
        for name, g in part:
            gains.setdefault(name, []).append(g)
    counts = {name: len(g) for name, g in gains.items()}
    return {name: calibrate(np.array(g), FALSE_ALARMS) for name, g in gains.items()}, counts


def penalty(table: Penalties, counts: dict[str, int], reading: str) -> float:
    """A reading's penalty: its own where ``MIN_CALIBRATION`` change-free histories set it, else the largest."""
    if counts.get(reading, 0) >= MIN_CALIBRATION:
        return table[reading]
    return max(table[name] for name, count in counts.items() if count >= MIN_CALIBRATION)


def detect(values: np.ndarray, table: Penalties, counts: dict[str, int], multipliers: Sequence[float]
           ) -> list[list[int]]:
    """The changes in ``values`` (a history's timings) at each multiplier of its reading's penalty."""
    x = np.log(np.asarray(values, dtype=float))
    model, name = read(x)
    likelihoods = stretch_likelihoods(x, model)
    return [partition(likelihoods, m * penalty(table, counts, name)) for m in multipliers]


def _detect(task: tuple[np.ndarray, Penalties, dict[str, int], Sequence[float]]) -> list[list[int]]:
    return detect(*task)


def detections(histories: Sequence[History], table: Penalties, counts: dict[str, int],
               multipliers: Sequence[float] = (1.0,), processes: int = 1) -> list[list[list[int]]]:
    """Each history's changes at its reading's penalty × each of ``multipliers``."""
    if not any(count >= MIN_CALIBRATION for count in counts.values()):
        raise ValueError(f"no reading was seen on {MIN_CALIBRATION} change-free histories: calibrate on more")
    return map_processes(_detect, [(h.values, table, counts, list(multipliers)) for h in histories], processes)
