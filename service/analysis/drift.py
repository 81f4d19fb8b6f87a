"""Is a series drifting, and which steps remain once the drift is modelled?

A slow movement — thermals, a filling cache or disk, a warm-up that settles, a nightly job's
rhythm — is no change, but a level test on wide windows calls it one: a 1 % sinusoid cut into
a staircase of "steps". Drift is modelled here as a smooth curve over the whole series, from a
nested family of bases (``options``): a straight line, line and three warm-ups ``exp(-t/τ)``,
then cosines (a DCT-II basis) down to periods of ``2 × FIRST_PERIOD`` and then
``MIN_PERIOD`` commits. Faster than that is not drift. Beside them, two curves of the series'
own: one warm-up whose time constant is read from the series (``WARMUP_GRID``, charged
``WARMUP_COST``), and one sinusoid (on a line) of a period between ``FIRST_PERIOD`` commits and
the series' length — thermals or a nightly job's rhythm — whose period is read from the series
(the strongest of a grid of frequencies, ``SINE_STEPS`` per 1/n apart) and charged ``SINE_COST``
parameters for it: a cosine basis needs a dozen columns for what a sinusoid says with two, and
would lose on BIC to a staircase that follows it.

Steps and drift compete in one regression: steps are eliminated backwards (the least significant
first) with the drift's columns always in, and the model with drift is chosen only when it beats
the best drift-free model on BIC (Schwarz 1978), each step costing ``1 + STEP_COST`` parameters
because its place was searched for (Zhang & Siegmund 2007 charge change points the same way).
A staircase that follows a ramp pays for every stair, the ramp for one slope, so a clean
drifting series keeps no step; a real step still stands out of a smooth curve. A straight line
pays ``LINE_COST`` more: a step in mid-series is nearly a line.

Drift is small: thermals, a cache, a warm-up move a timing by a few per cent. A curve that moves
the series by more than ``MAX_SWING`` (10 %) is taken as drift only when it beats the best other
account by ``SWING_MARGIN`` of BIC: a sinusoid on a line followed a +5 % and a +10 % step 30
commits apart in 3 % noise 2.7 better than the two steps, and nothing was reported; a smooth
creep of 15 % or a population's growth beats any staircase by far more.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import special

from roofwatch.service.analysis.arrays import weighted_mean

MIN_PERIOD = 25.0  # commits: the fastest cosine in the largest basis
FIRST_PERIOD = 50.0  # commits: the fastest cosine in the middle one
WARMUP_TAUS = (4.0, 12.0, 36.0)  # commits: time constants of warm-ups that settle
MAX_SWING = 0.10  # log units: a drift whose curve moves the series further than this ...
SWING_MARGIN = 10.0  # ... must beat the best other account by this much BIC: very strong evidence (Kass & Raftery 1995)
STEP_COST = 2.0  # extra BIC parameters per step, for having searched its place
DRIFT_ALPHA = 1e-3  # per step, eliminating steps with the drift in
SINE_STEPS = 4  # frequencies of the sinusoid grid per 1/n
SINE_MAX = 32  # frequencies at most
WARMUP_COST = 1.0  # extra BIC parameters of the series' own warm-up, for having read its time constant
SINE_REFINE = 4  # the grid's best frequency is refined on 2 × this + 1 points between its neighbours, twice
STRONGEST_MARGIN = 5  # points each side of the single strongest step taken out before a sinusoid is looked for
SINE_ALONE = False  # also a sinusoid alone, beside one on a line (no better on seeds 0-9, 6 % more CPU)
SINE_COST = 2.0  # extra BIC parameters of a sinusoid, for having searched its period
WARMUP_GRID = np.geomspace(3.0, 100.0, 40)  # commits: the time constants a warm-up of the series' own is read from
LINE_COST = 1.0  # extra BIC parameters of a straight line: a step in mid-series is about 0.85 correlated with a line,
# and at one parameter against a step's three a line won every near tie (steps of 4-6 standard errors in quiet series;
# chosen on seeds 0-9: 1 / 2 % steps found 0.457 → 0.471 / 0.670 → 0.689, false alarms per clean drifting series 0.020
# → 0.033 with the series' own warm-up in, 0.05 the budget)


def frequencies(n: int) -> np.ndarray:
    """The sinusoid grid, cycles per commit: from one cycle over the series to one per ``FIRST_PERIOD``."""
    low, high = 1.0 / n, 1.0 / FIRST_PERIOD
    if high <= low:
        return np.zeros(0)
    count = min(SINE_MAX, int(math.ceil(SINE_STEPS * n * (high - low))) + 1)
    return np.linspace(low, high, count)


def waves(n: int, f: np.ndarray) -> np.ndarray:
    """A sine and a cosine column per frequency of ``f`` (cycles per commit), in that order.

    Each frequency's turn ``exp(2πif)`` raised to every commit by a running product: a third of the time of a sine
    and a cosine of every phase (the refined sinusoid grid was a twelfth of a series' analysis), and within a few
    10⁻¹⁵ of them per commit (as close as a phase of thousands of radians, rounded, lets those be).
    """
    f = np.asarray(f, dtype=float)
    turns = np.empty((n, len(f)), dtype=complex)
    turns[:1] = 1.0
    turns[1:] = np.exp(2j * np.pi * f)[None, :]
    turns.cumprod(axis=0, out=turns)
    out = np.empty((n, len(f), 2))
    out[..., 0], out[..., 1] = turns.imag, turns.real  # interleaved: a sine and a cosine per frequency
    return out.reshape(n, 2 * len(f))


@lru_cache(maxsize=8)
def grid_waves(n: int) -> np.ndarray:
    out = waves(n, frequencies(n))
    out.flags.writeable = False
    return out


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
    """The nested drift models, simplest first (a straight line), as column indexes into ``basis(n)``."""
    warmups = len(WARMUP_TAUS)
    first = 1 + warmups
    slow = max(1, int(2 * n / FIRST_PERIOD))
    every = max(1, int(2 * n / MIN_PERIOD))
    return [[0], list(range(first)), list(range(first + slow)), list(range(first + every))]


def _products(full: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The columns ``full`` weighted by ``w``, their normal matrix and their suffix sums (a zero row last)."""
    weighted = full * w[:, None]  # also when every weight is 1: ``full.T @ full`` may take another BLAS route
    return weighted, full.T @ weighted, np.vstack([np.cumsum(weighted[::-1], axis=0)[::-1],
                                                   np.zeros((1, full.shape[1]))])


@lru_cache(maxsize=8)
def _unweighted(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A level and ``basis(n)`` as columns, their normal matrix and their suffix sums, for a series whose every
    value weighs 1 (read-only): made once per length by ``_products``, as a weighted series gets them, so the
    numbers are the same to the last bit."""
    full = np.column_stack([np.ones(n), basis(n)])
    _weighted, zz, suffix_z = _products(full, np.ones(n))
    for array in (full, zz, suffix_z):
        array.flags.writeable = False
    return full, zz, suffix_z


@lru_cache(maxsize=64)
def _unweighted_inverse(n: int, fixed: tuple[int, ...]) -> np.ndarray:
    """``_symmetric_inverse`` of the unweighted products of the level and basis columns ``fixed`` (read-only)."""
    _full, zz, _suffix = _unweighted(n)
    out = _symmetric_inverse(zz[np.ix_(fixed, fixed)])
    out.flags.writeable = False
    return out


@lru_cache(maxsize=4096)
def _t_bar(dof: int, alpha: float) -> float:
    """The |t| a step must pass for a two-sided p-value under ``alpha`` at ``dof`` degrees of freedom: one inverse
    of the t distribution per degree of freedom and bar, where the elimination asked for a p-value every round."""
    return float(-special.stdtrit(dof, alpha / 2))


def _symmetric_inverse(matrix: np.ndarray) -> np.ndarray:
    """Inverse of a normal matrix through its Cholesky factor, a tenth of the cost of an SVD at 45 columns; the
    pseudo-inverse where it is singular or too ill-conditioned for Cholesky to be trusted (a weight of zero
    over a drift column's support)."""
    try:
        lower = np.linalg.cholesky(matrix)
    except np.linalg.LinAlgError:
        return np.linalg.pinv(matrix)
    diagonal = np.abs(np.diag(lower))
    if float(diagonal.min()) <= 1e-7 * float(diagonal.max()):
        return np.linalg.pinv(matrix)
    inverse_lower = np.linalg.inv(lower)
    return inverse_lower.T @ inverse_lower


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
        # Centred: the RSS is the sum of squares less what the columns explain, and for log-times near -9 that sum
        # is thousands against an RSS of 10⁻³, every digit of it lost to the normal matrix's conditioning. The
        # level column takes any constant, so no fit changes but for those digits
        self.y, self.w = y - weighted_mean(y, w), w
        y = self.y
        # Most series weigh every value 1 (one mode, nothing measured twice): their products of the basis depend
        # on the length alone, and are formed once per length
        self.unweighted = bool(np.all(w == 1.0))
        if self.unweighted:
            self.full, self.zz, self.suffix_z = _unweighted(n)
            weighted = self.full
        else:
            self.full = _unweighted(n)[0]  # the columns are the same; only their products take the weights
            weighted, self.zz, self.suffix_z = _products(self.full, w)
        self.zy = weighted.T @ y
        self.basis_columns = self.full.shape[1]  # columns beyond these were added for this series alone
        self.yy = float(np.sum(w * y * y))
        self.suffix_w = np.concatenate([np.cumsum(w[::-1])[::-1], [0.0]])
        self.suffix_y = np.concatenate([np.cumsum((w * y)[::-1])[::-1], [0.0]])
        self.extra, self.suffix_extra = np.zeros((n, 0)), np.zeros((n + 1, 0))  # columns added, and their suffix sums
        self._drift_fits: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray, float]] = {}
        self._step_products: dict[tuple[tuple[int, ...], int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def add(self, columns: np.ndarray) -> list[int]:
        """Drift columns beyond ``basis`` (the series' own warm-up and sinusoids), once; their indexes, as ``basis``'s
        are given.

        Kept beside the basis' columns and suffix sums, not copied onto them: a series' basis is a few dozen columns
        of every commit, and only the rows of the steps and the columns of one drift model are read at a time.
        """
        if self.extra.shape[1]:
            raise ValueError("drift columns are added once per series")
        new = np.asarray(columns, dtype=float).reshape(self.n, -1)
        weighted = new * self.w[:, None]
        first = self.width - 1
        cross = self.full.T @ weighted
        old, extra = len(self.zz), new.shape[1]
        zz = np.empty((old + extra, old + extra))  # np.block's assembly costs more than these four copies
        zz[:old, :old], zz[:old, old:], zz[old:, :old], zz[old:, old:] = self.zz, cross, cross.T, new.T @ weighted
        self.zz = zz
        self.zy = np.concatenate([self.zy, weighted.T @ self.y])
        self.extra = new
        self.suffix_extra = np.vstack([np.cumsum(weighted[::-1], axis=0)[::-1], np.zeros((1, extra))])
        return list(range(first, first + extra))

    @property
    def width(self) -> int:
        """Columns: the level, the basis and any added."""
        return self.full.shape[1] + self.extra.shape[1]

    def eliminate(self, steps: Sequence[int], columns: Sequence[int] | None, alpha: float, searched: float = 0.0,
                  bound: float = math.inf) -> Fit:
        """Backward elimination of ``steps`` (the least significant first) with drift ``columns`` of ``basis`` in.

        ``searched``: extra BIC parameters the drift is charged for what was searched to choose it. ``bound``: a
        BIC the caller already has; a fit that cannot come under it is abandoned, returned with an infinite RSS.
        Each step that leaves raises the RSS and the drift's parameters stay, so the BIC of the RSS so far with
        the drift's parameters alone is a floor under every fit the elimination can still return.
        """
        fixed = [0, *(1 + c for c in (columns or ()))]
        k = sorted(set(steps))
        inverse_zz, drift_coef, total = self._drift_alone(fixed)
        at_steps, suffix_y, suffix_z = self._at_steps(tuple(k))
        sz = suffix_z[:, fixed]
        gram = at_steps - sz @ inverse_zz @ sz.T
        cross = suffix_y - sz @ drift_coef
        drift_cost = math.log(self.n) * (len(fixed) + searched)
        active = list(range(len(k)))
        inverse = None  # of gram over ``active``, kept by downdating as steps leave
        while True:
            if not active:
                return Fit([], [], [], [], max(total, 1e-300), len(fixed) + searched)
            if inverse is None:
                try:
                    inverse = np.linalg.inv(gram if len(active) == len(k) else gram[np.ix_(active, active)])
                except np.linalg.LinAlgError:
                    active.pop()
                    continue
            kept = cross[active]
            coef = inverse @ kept
            rss = max(total - float(coef @ kept), 1e-300)
            if self.n * math.log(rss) + drift_cost >= bound:
                return Fit([], [], [], [], math.inf, len(fixed) + searched)
            dof = self.n - len(fixed) - len(active)
            if dof < 1:
                active.pop()
                inverse = None
                continue
            diagonal = inverse.diagonal()
            variances = np.maximum(diagonal, 1e-300) * (rss / dof)
            t2 = coef * coef / variances
            worst = int(t2.argmin())  # the largest p-value: one t distribution for every step
            if t2[worst] > _t_bar(dof, alpha) ** 2:
                se = np.sqrt(variances)
                p = 2 * special.stdtr(dof, -np.abs(coef / se))
                return Fit([k[i] for i in active], coef.tolist(), se.tolist(), p.tolist(), rss,
                           len(fixed) + searched + len(active) * (1 + STEP_COST))
            active.pop(worst)
            if diagonal[worst] > 1e-12 * max(float(np.abs(diagonal).max()), 1e-300):
                # the inverse without one row and column: a rank-one downdate, no new inversion
                keep = np.arange(len(diagonal)) != worst
                column = inverse[keep, worst]
                inverse = inverse[keep][:, keep] - column[:, None] * inverse[worst, keep] / diagonal[worst]
            else:
                inverse = None

    def _at_steps(self, steps: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The steps' own normal matrix, and their products with ``y`` and with every column (cached: every drift
        model eliminates from the same candidates; columns added since are read afresh)."""
        key = (steps, self.width)
        if key not in self._step_products:
            k = np.asarray(steps, dtype=int)
            suffix_z = np.hstack([self.suffix_z[k], self.suffix_extra[k]]) if self.extra.shape[1] else self.suffix_z[k]
            self._step_products[key] = (self.suffix_w[np.maximum(k[:, None], k[None, :])], self.suffix_y[k], suffix_z)
        return self._step_products[key]

    def curve(self, fit: Fit, columns: Sequence[int]) -> np.ndarray:
        """The drift of ``fit`` — its ``columns`` of ``basis``, fitted beside its steps — at every commit, in log units
        about the series' weighted mean (a least-squares fit of its own)."""
        fixed = [0, *(1 + c for c in columns)]
        t = np.arange(self.n)
        full = np.hstack([self.full, self.extra])
        design = np.column_stack([full[:, fixed], *((t >= k).astype(float) for k in fit.steps)])
        root = np.sqrt(self.w)
        coef = np.linalg.lstsq(design * root[:, None], self.y * root, rcond=None)[0]
        return full[:, fixed[1:]] @ coef[1:len(fixed)]

    def swing(self, fit: Fit, columns: Sequence[int]) -> float:
        """How far the drift of ``fit`` moves the series, highest less lowest, in log units (asked of a drift about to
        be chosen only)."""
        return float(np.ptp(self.curve(fit, columns)))

    def _drift_alone(self, fixed: list[int]) -> tuple[np.ndarray, np.ndarray, float]:
        """The level-and-drift regression without steps: its normal matrix's inverse, coefficients and RSS (cached:
        every drift model is eliminated against more than once)."""
        key = tuple(fixed)
        if key not in self._drift_fits:
            if self.unweighted and max(fixed) < self.basis_columns:
                inverse_zz = _unweighted_inverse(self.n, key)
            else:
                inverse_zz = _symmetric_inverse(self.zz[np.ix_(fixed, fixed)])
            zy = self.zy[fixed]
            coef = inverse_zz @ zy
            self._drift_fits[key] = (inverse_zz, coef, self.yy - float(zy @ inverse_zz @ zy))
        return self._drift_fits[key]


@dataclass(frozen=True)
class Choice:
    columns: list[int] | None  # the drift model's columns of ``basis``; None: no drift
    fit: Fit


@dataclass(frozen=True)
class _Waves:
    """Sine and cosine columns with a level and line projected out (weighted), and their weighted cross products."""

    sines: np.ndarray
    cosines: np.ndarray
    ss: np.ndarray
    cc: np.ndarray
    sc: np.ndarray

    @classmethod
    def project(cls, columns: np.ndarray, w: np.ndarray, line: np.ndarray, line_inverse: np.ndarray,
                unweighted: bool = False) -> _Waves:
        weighted = columns if unweighted else columns * w[:, None]  # every weight 1: the product is the columns
        columns = columns - line @ (line_inverse @ (line.T @ weighted))
        sines, cosines = columns[:, 0::2], columns[:, 1::2]
        return cls(sines, cosines, w @ (sines * sines), w @ (cosines * cosines), w @ (sines * cosines))

    def power(self, residuals: np.ndarray, w: np.ndarray) -> np.ndarray:
        """What a sine and cosine of each frequency add to a level and line, by weighted least squares: one row per
        residual (a column of ``residuals``), one column per frequency."""
        weighted = residuals.T * w
        bs, bc = weighted @ self.sines, weighted @ self.cosines
        det = np.maximum(self.ss * self.cc - self.sc * self.sc, 1e-300)
        return (self.cc * bs * bs - 2 * self.sc * bs * bc + self.ss * bc * bc) / det


def _line(n: int, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A level and a line as columns, and the inverse of their weighted normal matrix."""
    line = np.column_stack([np.ones(n), np.arange(n) / n - 0.5])
    return line, np.linalg.inv(line.T @ (line * w[:, None]))


@lru_cache(maxsize=8)
def _unweighted_grid(n: int) -> tuple[np.ndarray, np.ndarray, _Waves]:
    """``_line`` and the sinusoid grid projected, for a series whose every value weighs 1: made once per length,
    as a weighted series gets them, so the numbers are the same to the last bit."""
    ones = np.ones(n)
    line, line_inverse = _line(n, ones)
    grid = _Waves.project(grid_waves(n), ones, line, line_inverse, unweighted=True)
    for array in (line, line_inverse, grid.sines, grid.cosines, grid.ss, grid.cc, grid.sc):
        array.flags.writeable = False
    return line, line_inverse, grid


def _strongest_sines(regression: Regression, level_steps: Sequence[int]) -> list[float]:
    """Frequencies of the strongest sinusoid in the series, in what its level steps leave, and in what its strongest
    single step leaves (a staircase can follow a sinusoid away, one step cannot): the best of the grid, then refined
    twice between its neighbours (a period off by a few commits is a phase off by a radian at the ends)."""
    n = regression.n
    grid = frequencies(n)
    if not len(grid):
        return []
    y, w = regression.y, regression.w
    spacing = grid[1] - grid[0] if len(grid) > 1 else grid[0] / 2
    if regression.unweighted:
        line, line_inverse, projected = _unweighted_grid(n)
    else:
        line, line_inverse = _line(n, w)
        projected = _Waves.project(grid_waves(n), w, line, line_inverse)

    def without(steps: Sequence[int]) -> np.ndarray:
        bounds = [0, *sorted(set(steps)), n]
        out = y.copy()
        for s, e in zip(bounds, bounds[1:]):
            if e > s and w[s:e].sum() > 0:
                out[s:e] -= weighted_mean(y[s:e], w[s:e])
        return out

    cw, cy = np.cumsum(w)[:-1], np.cumsum(w * y)[:-1]
    wl, wr = np.maximum(cw, 1e-300), np.maximum(cw[-1] + w[-1] - cw, 1e-300)
    gain = (cy / wl - (cy[-1] + w[-1] * y[-1] - cy) / wr) ** 2 * wl * wr / (wl + wr)
    strongest = 1 + int(np.argmax(gain[STRONGEST_MARGIN:n - 1 - STRONGEST_MARGIN])) + STRONGEST_MARGIN \
        if n > 2 * STRONGEST_MARGIN + 2 else None
    residuals = np.column_stack([without([]), without(level_steps), *([without([strongest])] if strongest else [])])
    best = grid[np.argmax(projected.power(residuals, w), axis=1)]
    width = spacing
    for _ in range(2):  # each residual's best, refined between its neighbours; shared centres evaluated once
        centres, which = np.unique(best, return_inverse=True)
        fine = np.linspace(np.maximum(centres - width, 0.5 / n), np.minimum(centres + width, grid[-1]),
                           2 * SINE_REFINE + 1).T
        fine_waves = _Waves.project(waves(n, fine.ravel()), w, line, line_inverse, regression.unweighted)
        scores = fine_waves.power(residuals, w).reshape(len(best), len(centres), -1)
        rows = np.arange(len(best))
        best = fine[which, np.argmax(scores[rows, which], axis=1)]
        width /= SINE_REFINE
    return sorted({round(float(f), 12) for f in best})


@lru_cache(maxsize=8)
def warmups(n: int) -> np.ndarray:
    """A warm-up column ``exp(-t/τ)`` per time constant of ``WARMUP_GRID`` (read-only)."""
    out = np.exp(-np.arange(n)[:, None] / WARMUP_GRID[None, :])
    out.flags.writeable = False
    return out


def _likeliest_warmup(regression: Regression) -> float:
    """The time constant of the warm-up that, beside a level, explains most of the series (weighted least squares).

    Three fixed ones (``WARMUP_TAUS``, each alone a model before) left a warm-up that settles in 20 commits between
    12 and 36, and a step at commit 20-50 then fitted it better than either (6 of the 8 false alarms on clean
    drifting tuning histories once every drift model paid a little more).
    """
    y, w = regression.y, regression.w
    columns = warmups(regression.n)
    centred = columns - (w @ columns) / w.sum()
    residual = (y - weighted_mean(y, w)) * w
    gain = (residual @ centred) ** 2 / np.maximum(w @ (centred * centred), 1e-300)
    return float(WARMUP_GRID[int(np.argmax(gain))])


def choose(regression: Regression, candidates: Sequence[int], level_steps: Sequence[int]) -> Choice:
    """The drift model (or none) with the lowest BIC, each with the steps of ``candidates`` that survive it.

    ``level_steps`` are the steps a drift-free local test kept; the drift-free side is the better
    of those and of a global elimination, so drift has to beat the best account without it. A drift
    that would move the series by more than ``MAX_SWING`` has to beat it by ``SWING_MARGIN``.
    """
    n = regression.n
    pool = sorted(set(candidates) | set(level_steps))
    plain = min((regression.eliminate(pool, None, DRIFT_ALPHA), regression.eliminate(level_steps, None, 1.0)),
                key=lambda f: f.bic(n))
    best = Choice(None, plain)
    line, *curves = options(n)
    drifts = [(line, LINE_COST), *((columns, 0.0) for columns in curves)]
    # the series' own warm-up and sinusoids, added as columns at once: each addition copies every column
    sines = _strongest_sines(regression, level_steps)
    warmup, *added = regression.add(np.column_stack([np.exp(-np.arange(n) / _likeliest_warmup(regression)),
                                                     waves(n, np.array(sines))]))
    drifts.append(([warmup], WARMUP_COST))
    for wave in zip(added[0::2], added[1::2]):
        drifts += [(list(wave), SINE_COST), ([0, *wave], SINE_COST)] if SINE_ALONE else [([0, *wave], SINE_COST)]
    for columns, searched in drifts:
        fit = regression.eliminate(pool, columns, DRIFT_ALPHA, searched, bound=best.fit.bic(n))
        if fit.bic(n) < best.fit.bic(n) and (fit.bic(n) + SWING_MARGIN < best.fit.bic(n)
                                            or regression.swing(fit, columns) <= MAX_SWING):
            best = Choice(columns, fit)
    return best
