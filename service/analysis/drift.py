"""Is a series drifting, and which steps remain once the drift is modelled?

A slow movement — thermals, a filling cache or disk, a warm-up that settles, a nightly job's
rhythm — is no change, but a level test on wide windows calls it one: a 1 % sinusoid cut into
a staircase of "steps". Drift is modelled here as a smooth curve over the whole series, from a
nested family of bases (``OPTIONS``): a straight line, one warm-up ``exp(-t/τ)``, line and all
warm-ups, then cosines (a DCT-II basis) down to periods of ``2 × FIRST_PERIOD`` and then
``MIN_PERIOD`` commits. Faster than that is not drift.

Steps and drift compete in one regression: steps are eliminated backwards (the least significant
first) with the drift's columns always in, and the model with drift is chosen only when it beats
the best drift-free model on BIC (Schwarz 1978), each step costing ``1 + STEP_COST`` parameters
because its place was searched for (Zhang & Siegmund 2007 charge change points the same way).
A staircase that follows a ramp pays for every stair, the ramp for one slope, so a clean
drifting series keeps no step; a real step still stands out of a smooth curve.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import special

MIN_PERIOD = 25.0  # commits: the fastest cosine in the largest basis
FIRST_PERIOD = 50.0  # commits: the fastest cosine in the middle one
WARMUP_TAUS = (4.0, 12.0, 36.0)  # commits: time constants of warm-ups that settle
STEP_COST = 2.0  # extra BIC parameters per step, for having searched its place
DRIFT_ALPHA = 1e-4  # per step, eliminating steps with the drift in


@lru_cache(maxsize=8)
def basis(n: int) -> np.ndarray:
    """Columns: a line, the warm-ups, then cosines of periods 2n, n, 2n/3, ... down to ``MIN_PERIOD`` (read-only)."""
    t = (np.arange(n) + 0.5) / n
    cosines = max(1, int(2 * n / MIN_PERIOD))
    columns = [t - 0.5, *(np.exp(-np.arange(n) / tau) for tau in WARMUP_TAUS)]
    columns += [np.cos(np.pi * i * t) for i in range(1, cosines + 1)]
    out = np.column_stack(columns)
    out.flags.writeable = False  # shared by every series of this length
    return out


def options(n: int) -> list[list[int]]:
    """The nested drift models, simplest first, as column indexes into ``basis(n)``."""
    warmups = len(WARMUP_TAUS)
    first = 1 + warmups
    slow = max(1, int(2 * n / FIRST_PERIOD))
    every = max(1, int(2 * n / MIN_PERIOD))
    return [[0], *([1 + i] for i in range(warmups)), list(range(first)), list(range(first + slow)),
            list(range(first + every))]


@dataclass(frozen=True)
class Fit:
    """Steps kept by a global regression, with their size (log), standard error and p-value, and its RSS."""

    steps: list[int]
    log_steps: list[float]
    ses: list[float]
    p_values: list[float]
    rss: float
    parameters: float  # for BIC

    def bic(self, n: int) -> float:
        return n * math.log(max(self.rss, 1e-300)) + math.log(n) * self.parameters


class Regression:
    """The weighted regression of ``y`` on a level, any drift columns and any steps, from sums kept once.

    A step column is an indicator ``t >= k``, so every product with it is a suffix sum; with the
    products of the basis formed once, eliminating steps under any drift model is algebra on
    matrices of a few dozen rows (the steps' normal equations with the drift projected out:
    Frisch-Waugh-Lovell).
    """

    def __init__(self, y: np.ndarray, w: np.ndarray) -> None:
        n = len(y)
        self.n = n
        self.full = np.column_stack([np.ones(n), basis(n)])
        weighted = self.full * w[:, None]
        self.zz = self.full.T @ weighted
        self.zy = weighted.T @ y
        self.yy = float(np.sum(w * y * y))
        self.suffix_z = np.vstack([np.cumsum(weighted[::-1], axis=0)[::-1], np.zeros((1, self.full.shape[1]))])
        self.suffix_w = np.concatenate([np.cumsum(w[::-1])[::-1], [0.0]])
        self.suffix_y = np.concatenate([np.cumsum((w * y)[::-1])[::-1], [0.0]])
        self._inverses: dict[tuple[int, ...], np.ndarray] = {}

    def eliminate(self, steps: Sequence[int], columns: Sequence[int] | None, alpha: float) -> Fit:
        """Backward elimination of ``steps`` (the least significant first) with drift ``columns`` of ``basis`` in."""
        fixed = [0, *(1 + c for c in (columns or ()))]
        k = np.asarray(sorted(set(steps)), dtype=int)
        key = tuple(fixed)
        if key not in self._inverses:
            self._inverses[key] = np.linalg.pinv(self.zz[np.ix_(fixed, fixed)])
        inverse_zz = self._inverses[key]
        zy = self.zy[fixed]
        sz = self.suffix_z[k][:, fixed]
        gram = self.suffix_w[np.maximum(k[:, None], k[None, :])] - sz @ inverse_zz @ sz.T
        cross = self.suffix_y[k] - sz @ (inverse_zz @ zy)
        total = self.yy - float(zy @ inverse_zz @ zy)
        active = list(range(len(k)))
        while True:
            if not active:
                return Fit([], [], [], [], max(total, 1e-300), len(fixed))
            try:
                inverse = np.linalg.inv(gram[np.ix_(active, active)])
            except np.linalg.LinAlgError:
                active.pop()
                continue
            coef = inverse @ cross[active]
            rss = max(total - float(coef @ cross[active]), 1e-300)
            dof = self.n - len(fixed) - len(active)
            if dof < 1:
                active.pop()
                continue
            se = np.sqrt(np.maximum(np.diag(inverse), 1e-300) * rss / dof)
            p = 2 * special.stdtr(dof, -np.abs(coef / se))
            worst = int(np.argmax(p))
            if p[worst] < alpha:
                return Fit([int(k[i]) for i in active], coef.tolist(), se.tolist(), p.tolist(), rss,
                           len(fixed) + len(active) * (1 + STEP_COST))
            active.pop(worst)


@dataclass(frozen=True)
class Choice:
    columns: list[int] | None  # the drift model's columns of ``basis``; None: no drift
    fit: Fit


def choose(regression: Regression, candidates: Sequence[int], level_steps: Sequence[int]) -> Choice:
    """The drift model (or none) with the lowest BIC, each with the steps of ``candidates`` that survive it.

    ``level_steps`` are the steps a drift-free local test kept; the drift-free side is the better
    of those and of a global elimination, so drift has to beat the best account without it.
    """
    n = regression.n
    pool = sorted(set(candidates) | set(level_steps))
    plain = min((regression.eliminate(pool, None, DRIFT_ALPHA), regression.eliminate(level_steps, None, 1.0)),
                key=lambda f: f.bic(n))
    best = Choice(None, plain)
    for columns in options(n):
        fit = regression.eliminate(pool, columns, DRIFT_ALPHA)
        if fit.bic(n) < best.fit.bic(n):
            best = Choice(columns, fit)
    return best
