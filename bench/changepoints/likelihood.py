"""The likelihood of a step under the noise that truly made a history (``histories.NoiseModel``).

Least squares is the maximum-likelihood place of a step only when the noise is gaussian. Told
what each kind's noise really is — a Student-t's degrees of freedom, a busy neighbour's rate and
slowdown, an autotuner's gap and share, the drift's very curve — the likeliest place of a step
between two known neighbours is the split that maximises the profile log-likelihood

    ℓ(k) = max_μ Σ_{i<k} log f_i(x_i − μ − trend_i) + max_μ' Σ_{i≥k} log f_i(x_i − μ' − trend_i),

``f_i`` the density of commit ``i``'s noise (Hinkley 1970 for one change in a known density; the
generalised likelihood ratio ``ℓ(k̂) − ℓ(no step)`` is the statistic of Csörgő & Horváth 1997,
§1.4). The levels ``μ`` are profiled on a grid an eighth of the jitter's scale apart, refined by a
parabola through the best grid point and its neighbours: every prefix and every suffix of the
stretch costs one cumulative sum over the grid, so all splits of a 200-commit stretch are scored
at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from bench.changepoints.histories import NoiseModel

GRID_STEP = 1 / 8  # of the jitter's scale, between the levels tried
TABLE_STEPS = 64  # per jitter scale: a density with one share over a stretch is read off a table this fine
GRID_MARGIN = 4.0  # jitter scales beyond the stretch's lowest and highest value
SMOOTH = 50.0  # nats: neighbours of a profile's top closer than this lie on a smooth peak
IMPOSSIBLE = -1e6  # log-density of a value the model cannot make (below a slow-tail-only level): finite, so sums stay ordered


def _log_band(r: np.ndarray, sigma: float, low: float, high: float) -> np.ndarray:
    """Log-density of ``r = log(1 + u) + e``: ``u`` uniform on [low, high] (relative; negative for a speed-up), ``e``
    normal of sd ``sigma``. With ``y = log(1 + u)`` its density is ``e^y / (high − low)`` on [log(1+low), log(1+high)],
    and the convolution is closed: ``e^{r + σ²/2} [Φ((B − r − σ²)/σ) − Φ((A − r − σ²)/σ)] / (high − low)``."""
    if high - low <= 0:
        return stats.norm.logpdf(r, loc=np.log1p(low), scale=sigma)
    a, b = np.log1p(low), np.log1p(high)
    upper, lower = (b - r - sigma ** 2) / sigma, (a - r - sigma ** 2) / sigma
    # log(Φ(u) − Φ(l)) without cancellation: on the upper side use the mirrored tails, Φ(−l) − Φ(−u)
    mirrored = lower > 0
    big = np.where(mirrored, special.log_ndtr(-lower), special.log_ndtr(upper))
    small = np.where(mirrored, special.log_ndtr(-upper), special.log_ndtr(lower))
    gap = big + np.log1p(-np.exp(np.minimum(small - big, -1e-12)))
    return r + sigma ** 2 / 2 + gap - np.log(high - low)


def log_density(model: NoiseModel, residual: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Log-density of each noise value ``residual`` (log units, level and trend taken out) at commits ``index``;
    ``residual`` broadcasts against ``index`` along its last axis."""
    sigma = model.sigma
    if model.jitter == "normal":
        base = stats.norm.logpdf(residual, scale=sigma)
    elif model.jitter == "t":
        base = stats.t.logpdf(residual / sigma, model.df) - np.log(sigma)
    elif model.jitter == "half-t":
        base = np.where(residual >= 0, np.log(2.0) + stats.t.logpdf(residual / sigma, model.df) - np.log(sigma),
                        IMPOSSIBLE)
    else:
        raise ValueError(f"unknown jitter {model.jitter!r}")
    slow = model.slow_share[index] if len(model.slow_share) else np.zeros(len(index))
    if not slow.any() and model.fast_share == 0:
        return np.maximum(base, IMPOSSIBLE)
    parts = [np.log(np.maximum(1.0 - slow - model.fast_share, 1e-300)) + base]
    if slow.any():
        parts.append(np.log(np.maximum(slow, 1e-300)) + _log_band(residual, sigma, *model.slow_band))
    if model.fast_share > 0:
        low, high = model.fast_band
        parts.append(np.log(model.fast_share) + _log_band(residual, sigma, -high, -low))
    return np.maximum(np.logaddexp.reduce(np.stack(np.broadcast_arrays(*parts)), axis=0), IMPOSSIBLE)


def best_level(table: np.ndarray) -> np.ndarray:
    """Per column of ``table`` (levels × stretches, log-likelihoods) its largest value, the profile likelihood,
    refined by a parabola through its neighbours."""
    g = np.argmax(table, axis=0)
    cols = np.arange(table.shape[1])
    top = table[g, cols]
    inner = (g > 0) & (g < table.shape[0] - 1)
    below = table[np.maximum(g - 1, 0), cols]
    above = table[np.minimum(g + 1, table.shape[0] - 1), cols]
    curve = 2 * top - below - above
    # a smooth profile an eighth of a scale off its top is a few nats lower; a neighbour much lower is a cliff (a
    # slow-tail-only level above the lowest value), where a parabola would invent a peak
    ok = inner & (curve > 0) & (top - below < SMOOTH) & (top - above < SMOOTH)
    return np.where(ok, top + (above - below) ** 2 / (8 * np.where(ok, curve, 1.0)), top)


@dataclass(frozen=True)
class Split:
    """The likeliest step in a stretch: ``index`` (the first commit after it) and the log-likelihood it gains."""

    index: int
    gain: float  # ℓ(k̂) − ℓ(no step), in nats


def profile(log_values: np.ndarray, model: NoiseModel, lo: int, hi: int) -> np.ndarray:
    """Cumulative log-likelihood of ``log_values[lo:hi]`` under ``model`` at every level of the grid: row ``j``,
    column ``i`` is Σ of the first ``i`` values' log-densities about level ``j`` (so ``hi - lo + 1`` columns, the
    first all zero). Any stretch's profile likelihood is then the ``best_level`` of a difference of two columns."""
    index = np.arange(lo, hi)
    z = log_values[lo:hi] - (model.trend[lo:hi] if len(model.trend) else 0.0)
    h = model.sigma / TABLE_STEPS  # the density table's step; levels are TABLE_STEPS of them apart, a scale
    low = np.floor((z.min() - GRID_MARGIN * model.sigma) / h)
    levels = h * (low + GRID_STEP * TABLE_STEPS * np.arange(int(np.ceil((z.max() - z.min()) / (GRID_STEP * model.sigma)
                                                                           + 2 * GRID_MARGIN / GRID_STEP)) + 1))
    shares = model.slow_share[lo:hi] if len(model.slow_share) else np.zeros(1)
    plain = model.jitter == "normal" and not shares.any() and model.fast_share == 0
    if not plain and np.all(shares == shares[0]):
        # one share over the stretch: the density is a function of the residual alone, tabulated once on
        # multiples of h (so a slow-tail-only density's edge at 0 is a node) and interpolated linearly (off by
        # about 1 / (8 TABLE_STEPS²) of a nat per value). Levels lie on the same lattice, so each value's
        # fractional place between two nodes is the same at every level, and no search is needed.
        place = (z - h * low) / h
        node = np.floor(place).astype(int)
        frac = place - node
        first = int(node.min()) - int(GRID_STEP * TABLE_STEPS) * (len(levels) - 1) - 1
        table = log_density(model, h * np.arange(first, int(node.max()) + 2), np.full(1, lo))
        at = node[None, :] - (GRID_STEP * TABLE_STEPS * np.arange(len(levels)))[:, None].astype(int) - first
        density = table[at] * (1 - frac) + table[at + 1] * frac
        if model.jitter == "half-t":
            density[at + frac < -first] = IMPOSSIBLE  # below the edge: not a blend of its two nodes
    else:
        density = log_density(model, z[None, :] - levels[:, None], index)
    return np.concatenate([np.zeros((len(levels), 1)), np.cumsum(density, axis=1)], axis=1)


def likeliest_split(log_values: np.ndarray, model: NoiseModel, lo: int, hi: int, min_side: int = 1) -> Split:
    """The maximum-likelihood step in ``log_values[lo:hi]`` under ``model``, each side at least ``min_side`` commits."""
    if hi - lo < 2 * min_side:
        raise ValueError("the stretch is too short for a split")
    prefix = profile(log_values, model, lo, hi)
    splits = np.arange(min_side, hi - lo - min_side + 1)
    left = best_level(prefix[:, splits])
    right = best_level(prefix[:, -1:] - prefix[:, splits])
    total = left + right
    best = int(np.argmax(total))
    none = float(best_level(prefix[:, -1:])[0])
    return Split(lo + int(splits[best]), float(total[best]) - none)
