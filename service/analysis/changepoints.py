"""Change points in one benchmark series: where did the level move, or the mix of its modes, and by how much?

Benchmark histories are not the tidy gaussian steps most detectors assume: timings have heavy
tails, a noisy neighbour slows a few runs in a row, a GPU kernel's per-process median lands in
a fast or a slow mode, and thermals or a filling disk make the level drift. Every threshold is
set against what the series shows about its own noise (``noise.read_noise``), never a fixed
floor: a 1 % step in a 0.3 % series is plain, in a 3 % series it is not there to see. What a
change must be worth is the team's ``min_effect``, applied by the A/B that confirms a candidate.

1. **Clean** — log-values; slow-mode points moved onto the fast mode and weighted by
   1/variance, outliers Hampel-filtered and winsorised (``noise``).
2. **Candidates** — seeded binary segmentation (Kovács, Li, Bühlmann & Munk 2023): the weighted
   CUSUM over a deterministic set of intervals at every scale, greedily taking the largest
   first. Short intervals find a step between two close ones, or a bump of two steps that
   cancel over a long stretch — which plain binary segmentation misses.
3. **Level steps** — each candidate is tested on the windows either side of it, bounded by its
   neighbours (weighted two-sample t, ``ALPHA``); the weakest failing one is dropped and the rest
   tested again until all hold (backward elimination, as E-divisive implementations in Otava do
   after each removal). Positions are refined to the best split within ``REACH`` commits. A
   bump or dip of under ``SHORT_SIDE`` commits between two steps must still hold with its
   ``EPISODE`` most telling points left out (one episode of a noisy neighbour is no change),
   and each side needs ``MIN_WEIGHT`` fast points' worth of weight. In a bimodal series each
   step is placed on the raw values before the modes are read again (``_mode_split``), and once
   more, a little way (``MODE_PLACE_REACH``), after the modes are read within the final steps.
4. **Floor** — where every run is a floor plus a slow delay (``noise.one_sided``: the low side
   short against the bulk, the density flat up to it), a level is its stretch's lowest values,
   far sharper than any mean: stretches also grow a step where their floor moved
   (``floor_gain`` over ``FLOOR_GAIN``, once in a hundred clean stretches), each step moves to
   where its floors split best nearby (``FLOOR_REACH``), a step whose floors pass ``FLOOR_GAIN``
   between its final neighbours is held and sized by them (``floor_step``), and drift is not
   looked for. Steps least squares missed spread the floors of their stretches, so a series whose
   low side is short already (``NEAR_FLOOR``) is read again with the floors' own steps. A
   stretch's floor is read ``FLOOR_MARGIN`` commits inside its neighbouring steps.
5. **Drift** — a smooth drift competes with the steps on BIC (``drift.choose``): a line,
   warm-ups, cosines, and a sinusoid of the series' own period (the level steps and the grown ones
   alike: a rank split sees a trend's two halves as two levels). When it wins, the steps kept
   are those that hold with the drift in, or that stand out of a local line and curve
   (``SHARP_ALPHA``): a clean drifting series keeps none, a step on top of drift stays. A
   curve that would move the series by more than ``drift.MAX_SWING`` must win by a wide margin.
6. **Mix** — in a bimodal series, the share of slow-mode points is segmented too (binary
   segmentation of a binomial CUSUM, ``MIX_ALPHA`` per stretch, a short stretch's surplus of
   slow points outlasting one episode); a move of the share where no location step is becomes
   a change with ``shift == "mix"``.
7. **The commit** — a step of ``EXACT_STEP`` noise deviations or more shows its side in every
   value, and is placed last on the raw values (``_exact_place``, a far value costing more on the
   side the series' far values seldom lie, ``_far_side``): the confirming A/B measures exactly the
   two commits either side of it, and a step named a commit off costs a search among its neighbours
   by A/B (``neighbours``) before it is confirmed.

Values are positive numbers (times, or throughputs); non-finite and non-positive entries are
skipped and indexes always refer to the input rows.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from functools import lru_cache

import numpy as np
from scipy import special

from roofwatch.service.analysis import drift
from roofwatch.service.analysis.arrays import median, quantiles, weighted_mean
from roofwatch.service.analysis.noise import (
    HAMPEL_K,
    HUBER_K,
    MAD_TO_SD,
    Noise,
    clean,
    floor_ratio,
    mann_whitney_z,
    one_sided,
    rank,
    read_noise,
    robust_sigma,
)

__all__ = ["ChangePoint", "detect", "robust_sigma"]

DEFAULT_ALPHA = 3e-5  # per level step, in its local windows (chosen on the acceptance histories, seeds 0-9)
DEFAULT_MIN_EFFECT = 0.0  # relative; the team's floor is applied by the A/B that confirms a candidate
DEFAULT_MIN_SIZE = 5  # points needed on each side of a change
DEFAULT_WINDOW = 80  # points either side used to test and size a level step
CANDIDATE_Z = 3.0  # CUSUM |z| for an interval to propose a candidate
SHARP_WINDOW = 25  # points either side for the step-over-a-curve test
SHARP_ALPHA = 1e-5  # per step, with drift in the model
REACH = 3  # commits a candidate may move when its position is refined
MIX_ALPHA = 1e-2  # per stretch of the slow-mode share
MIX_APART = 3  # a mix change this close to a location step is that step
EPISODE = 3  # commits a busy neighbour may slow in a row: a short side must hold without its EPISODE most telling points
MODE_REACH = 8  # commits a step of a bimodal series may move when placed on the raw values
MODE_PLACE_REACH = 4  # ... and when placed again once the modes are read within the final steps
MIN_WEIGHT = 3.0  # fast-mode points' worth of weight each side of a step needs
SHORT_SIDE = 12  # ... when it has fewer points than this
BUMP_SPREAD = 3.0  # noise deviations: a bump of under SHORT_SIDE commits whose own values spread wider is no one level
BUMP_SIDES = 20  # commits each side of such a bump whose median is the level it left and came back to
PLACE_PASSES = 3  # rounds of moving each step to the best split between its neighbours
FLOOR_SHARE = 0.2  # of a stretch's values, for the density at its floor
NEAR_FLOOR = 0.95  # floor_ratio under which a series not read as one-sided is read again with its floor steps: on
# the tuning seeds, 95 % of the slow-tail histories not read so pass it and 0.6-2 % of gaussian, t, drifting ones
FLOOR_MARGIN = 3  # commits a stretch's floor is read inside its neighbouring steps: one placed a commit off lends
# the stretch the next level's floor, and every split five commits on passed FLOOR_GAIN beside it
FLOOR_REACH = 8  # commits a step of a floor-and-slow-tail series may move to where its floors split best
FLOOR_GAIN = 8.0  # floor_gain a stretch passes once in a hundred or less, any length up to 512, half-normal or half-t
FLOOR_ALPHA = 0.01  # ... that share: beyond FLOOR_GAIN a clean stretch's largest gain passes g about
# FLOOR_ALPHA × exp(FLOOR_GAIN − g) of the time (the tail of the largest of exponentials; simulated, 40-500 points)
EXACT_STEP = 5.0  # noise deviations: a step this large is placed on the raw values (_exact_place) ...
EXACT_SIDE = 10  # ... each side's level the median of up to this many commits beyond those searched
EXACT_MIN_SIDE = 3  # ... and at least this many
RARE_SIDE_COST = 2.0  # ... a point far from a level on the side the series' far values seldom lie costs this many
# times one on the side they do: noise slows a run, and a timing's episodes and tails lie above it (a throughput's below)
FAR_SIDE_RATIO = 2.0  # far values lie on one side when the cleaning moved this many times more of them from it ...
FAR_SIDE_MIN = 3  # ... and at least this many
T_REACH = 5  # commits a step of a one-mode series may move when placed under Student-t noise (_t_place)
T_DOF = 4.0  # ... of that many degrees of freedom (Lange, Little & Taylor 1989)
GROWN_ALPHA = 1e-3  # per step found by growing, in its local windows once placed (see detect)
GROW_ROUNDS = 3  # rounds of looking for one more step in each stretch between the kept ones
# What the largest |z| of the Mann-Whitney statistic over a stretch's splits (each side ≥ DEFAULT_MIN_SIZE) passes
# once in a hundred stretches of exchangeable values, by the stretch's length: ranks make it the same for any
# noise (simulated, 40,000 random permutations per length up to 256, 15,000 beyond; tests/analysis check it).
STRETCH_Z = ((10, 2.402), (12, 2.680), (16, 2.820), (24, 3.042), (32, 3.138), (48, 3.262), (64, 3.312),
             (96, 3.394), (128, 3.471), (192, 3.520), (256, 3.529), (384, 3.603), (512, 3.600), (1024, 3.688))


@dataclass(frozen=True)
class ChangePoint:
    index: int  # input row of the first value after the change
    before: float  # level just before (the fast mode's, in a bimodal series), in the input's unit
    after: float  # level just after
    change_pct: float  # (after / before - 1) × 100; for a mix change, of the geometric mean
    p_value: float
    ci_low: float  # 95 % interval of change_pct
    ci_high: float
    shift: str = "location"  # "location": the level (every mode) moved; "mix": the share of the slow mode did
    modes: tuple[float, float] | None = None  # bimodal series: fast and slow mode levels just before
    slow_share: tuple[float, float] | None = None  # bimodal series: share of slow-mode points before, after


@dataclass(frozen=True)
class _Step:
    log_step: float
    se: float
    p_value: float
    held: bool = False  # already held to a test of its own once placed (a floor step's floor gain; see detect)


class _Sums:
    """Weighted prefix sums, so any window's mean and spread cost O(1)."""

    def __init__(self, y: np.ndarray, w: np.ndarray) -> None:
        self.unweighted = bool(np.all(w == 1.0))
        self.w = np.concatenate([[0.0], np.cumsum(w)])
        self.wy = np.concatenate([[0.0], np.cumsum(w * y)])
        self.wyy = np.concatenate([[0.0], np.cumsum(w * y * y)])

    def mean(self, lo: int, hi: int) -> float:
        return float((self.wy[hi] - self.wy[lo]) / max(self.w[hi] - self.w[lo], 1e-300))

    def step(self, k: np.ndarray | int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, int]:
        """Weighted two-sample step at ``k`` (scalar or array) within ``[lo, hi)``: (log step, se, dof)."""
        wl, wr = self.w[k] - self.w[lo], self.w[hi] - self.w[k]
        sl, sr = self.wy[k] - self.wy[lo], self.wy[hi] - self.wy[k]
        wl_, wr_ = np.maximum(wl, 1e-300), np.maximum(wr, 1e-300)
        rss = (self.wyy[hi] - self.wyy[lo]) - sl * sl / wl_ - sr * sr / wr_
        dof = hi - lo - 2
        se = np.sqrt(np.maximum(rss, 1e-300) / max(dof, 1) * (1 / wl_ + 1 / wr_))
        return sr / wr_ - sl / wl_, se, dof


def _t_p(t: float, dof: int) -> float:
    return float(2 * special.stdtr(max(dof, 1), -abs(t)))


def _window(cps: Sequence[int], n: int, i: int, width: int) -> tuple[int, int]:
    k = cps[i]
    return max(cps[i - 1] if i else 0, k - width), min(cps[i + 1] if i + 1 < len(cps) else n, k + width)


def _level_test(sums: _Sums, k: int, lo: int, hi: int) -> _Step | None:
    if k - lo < 2 or hi - k < 2:
        return None
    if min(sums.w[k] - sums.w[lo], sums.w[hi] - sums.w[k]) < MIN_WEIGHT:
        return None  # a side of slow-mode points barely says where the fast mode is
    d, se, dof = sums.step(k, lo, hi)
    return _Step(float(d), float(se), _t_p(float(d / se), dof))


def _episode_test(y: np.ndarray, w: np.ndarray, k: int, lo: int, hi: int) -> _Step | None:
    """The level test with the ``EPISODE`` points of the short side that most favour the step left out.

    A side of a few commits can be one episode of a noisy neighbour (slow runs, clipped but not
    replaced when they sit a few deviations out), or a bump between two close steps made of one:
    what is left of it must still differ.
    """
    left, right = np.arange(lo, k), np.arange(k, hi)
    short_right = len(right) <= len(left)
    short = right if short_right else left
    if len(short) - EPISODE < 2:
        return None
    d = weighted_mean(y[right], w[right]) - weighted_mean(y[left], w[left])
    sign = (1.0 if d > 0 else -1.0) * (1.0 if short_right else -1.0)
    kept = short[np.argsort(-sign * y[short], kind="stable")[EPISODE:]]
    left, right = (left, np.sort(kept)) if short_right else (np.sort(kept), right)
    wl, wr = w[left], w[right]
    ml, mr = weighted_mean(y[left], wl), weighted_mean(y[right], wr)
    rss = float(wl @ (y[left] - ml) ** 2 + wr @ (y[right] - mr) ** 2)
    dof = len(left) + len(right) - 2
    se = math.sqrt(max(rss, 1e-300) / max(dof, 1) * (1 / wl.sum() + 1 / wr.sum()))
    return _Step(float(mr - ml), se, _t_p(float(mr - ml) / se, dof))


def _bump(sums: _Sums, cps: Sequence[int], i: int, width: int) -> tuple[int, int] | None:
    """The window of step ``i`` when its short side (under ``SHORT_SIDE`` points) is a bump or a dip between it and
    a neighbouring step — above or below both sides, as one episode of a noisy neighbour would stand; else None.

    A short side at the end of the series is a change too new to have outlasted an episode (trimming it would
    only delay a new change); the first few commits of a history are not new, and are held to it. A short stair
    between two steps the same way is no episode.
    """
    n = len(sums.w) - 1
    k = cps[i]
    lo, hi = _window(cps, n, i, width)
    short_left = k - lo <= hi - k
    if min(k - lo, hi - k) >= SHORT_SIDE or (not short_left and i + 1 == len(cps)):
        return None
    if short_left and i == 0:
        return (lo, hi) if lo == 0 else None  # the first commits: nothing there is new, one episode is no change
    if short_left:  # the short stretch [lo, k) against what lies before its other step, and after k
        other = _window(cps, n, i - 1, width)[0]
        inner, outer, far = sums.mean(lo, k), sums.mean(k, hi), sums.mean(other, lo)
    else:
        other = _window(cps, n, i + 1, width)[1]
        inner, outer, far = sums.mean(k, hi), sums.mean(lo, k), sums.mean(hi, other)
    return (lo, hi) if (inner - outer) * (inner - far) > 0 else None


def _mixed_bumps(x: np.ndarray, sigma: float, cps: Sequence[int]) -> set[int]:
    """The steps that bound a bump of runs of a noisy neighbour, read as a step there and back.

    A bump of under ``SHORT_SIDE`` commits between two steps, above (or below) both sides, where the level before
    and after it is one (their medians within ``BUMP_SPREAD`` deviations) and its own raw values spread more
    than ``BUMP_SPREAD`` deviations (MAD): one level holds its points within the noise, while a busy neighbour's
    runs each slow by their own amount and leave points on the level between them. Two or three episodes in a row
    make more of the cleaning's running medians than one episode can (a run of eight slow commits of ten, 22 %
    and 36 % slow, was cleaned into a plateau 20 and 9 deviations up), and the episode test (``_episode_test``)
    takes only ``EPISODE`` points off it.
    """
    n = len(x)
    out: set[int] = set()
    for i in range(len(cps) - 1):
        a, b = cps[i], cps[i + 1]
        if b - a >= SHORT_SIDE:
            continue
        before = x[_window(cps, n, i, BUMP_SIDES)[0]:a]
        after = x[b:_window(cps, n, i + 1, BUMP_SIDES)[1]]
        if not len(before) or not len(after):
            continue
        inner, level_before, level_after = median(x[a:b]), median(before), median(after)
        bump = (inner - level_before) * (inner - level_after) > 0
        if (bump and abs(level_before - level_after) <= BUMP_SPREAD * sigma
                and MAD_TO_SD * median(np.abs(x[a:b] - inner)) > BUMP_SPREAD * sigma):
            out |= {a, b}
    return out


def _short_side_test(y: np.ndarray, w: np.ndarray, sums: _Sums, cps: Sequence[int], i: int, width: int
                     ) -> _Step | None:
    """The level test of step ``i``; when a short side is a bump, the less significant of it and ``_episode_test``."""
    lo, hi = _window(cps, len(y), i, width)
    test = _level_test(sums, cps[i], lo, hi)
    if test is None or _bump(sums, cps, i, width) is None:
        return test
    trimmed = _episode_test(y, w, cps[i], lo, hi)
    return test if trimmed is not None and trimmed.p_value <= test.p_value else _Step(
        test.log_step, test.se, 1.0 if trimmed is None else trimmed.p_value)


def _sharp_test(y: np.ndarray, w: np.ndarray, k: int, lo: int, hi: int) -> _Step | None:
    """Step at ``k`` over a local line and curve: what a smooth drift cannot make."""
    if k - lo < 3 or hi - k < 3:
        return None
    t = (np.arange(lo, hi) - (k - 0.5)) / (hi - lo)
    design = np.column_stack([np.ones(hi - lo), (np.arange(lo, hi) >= k).astype(float), t, t * t])
    root = np.sqrt(w[lo:hi])
    a, b = design * root[:, None], y[lo:hi] * root
    dof = hi - lo - design.shape[1]
    try:
        inverse = np.linalg.inv(a.T @ a)
    except np.linalg.LinAlgError:
        return None
    coef = inverse @ (a.T @ b)
    resid = b - a @ coef
    se = math.sqrt(max(float(inverse[1, 1]) * float(resid @ resid) / max(dof, 1), 1e-300))
    return _Step(float(coef[1]), se, _t_p(float(coef[1]) / se, dof))


@dataclass(frozen=True)
class _Scale:
    """One scale of the seeded intervals: their starts, ends and splits, and each split's weights and CUSUM root."""

    size: int
    starts: np.ndarray
    k: np.ndarray  # per interval × split
    s: np.ndarray
    e: np.ndarray
    ok: np.ndarray
    wl: np.ndarray
    wr: np.ndarray
    root: np.ndarray  # sqrt(1/wl + 1/wr)
    every_ok: bool  # no split has a side of zero weight (every one-mode series)


@lru_cache(maxsize=8)
def _intervals(n: int, min_size: int) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The seeded intervals at every scale (lengths shrinking by √2): size, starts, and per interval × split its
    split, start and end (read-only: the same for every series of this length)."""
    out = []
    length = float(n)
    while length >= 2 * min_size:
        size = int(round(length))
        starts = np.unique(np.round(np.linspace(0, n - size, max(1, math.ceil(2 * n / size) - 1))).astype(int))
        splits = np.arange(min_size, size - min_size + 1)
        k = starts[:, None] + splits[None, :]
        s, e = starts[:, None], starts[:, None] + size
        for array in (starts, k, s, e):
            array.flags.writeable = False
        out.append((size, starts, k, s, e))
        length /= math.sqrt(2)
    return out


def _scales(cumulative_w: np.ndarray, n: int, min_size: int) -> list[_Scale]:
    """The seeded intervals at every scale, weighed by the prefix sums ``cumulative_w``."""
    out = []
    for size, starts, k, s, e in _intervals(n, min_size):
        wl, wr = cumulative_w[k] - cumulative_w[s], cumulative_w[e] - cumulative_w[k]
        ok = (wl > 0) & (wr > 0)
        wl, wr = np.where(ok, wl, 1.0), np.where(ok, wr, 1.0)
        out.append(_Scale(size, starts, k, s, e, ok, wl, wr, np.sqrt(1 / wl + 1 / wr), bool(ok.all())))
    return out


@lru_cache(maxsize=8)
def _unweighted_scales(n: int, min_size: int) -> list[_Scale]:
    """``_scales`` of a series whose every value weighs 1: the same for every series of its length."""
    scales = _scales(np.concatenate([[0.0], np.cumsum(np.ones(n))]), n, min_size)
    for scale in scales:  # shared by every series of this length: read-only
        for field in fields(scale):
            value = getattr(scale, field.name)
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
    return scales


def _candidates(sums: _Sums, sigma: float, n: int, min_size: int) -> list[int]:
    """Seeded binary segmentation: every interval's best CUSUM split, the strongest first."""
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # per scale: -|z|, start, end, split
    scales = _unweighted_scales(n, min_size) if sums.unweighted else _scales(sums.w, n, min_size)
    for scale in scales:
        k, s, e = scale.k, scale.s, scale.e
        diff = (sums.wy[e] - sums.wy[k]) / scale.wr - (sums.wy[k] - sums.wy[s]) / scale.wl
        z = np.abs(diff) / (sigma * scale.root)
        if not scale.every_ok:
            z = np.where(scale.ok, z, 0.0)
        best = z.argmax(axis=1)
        rows = np.arange(len(scale.starts))
        top = z[rows, best]
        passed = top > CANDIDATE_Z
        found.append((-top[passed], scale.starts[passed], scale.starts[passed] + scale.size, k[rows, best][passed]))
    if not found:
        return []
    negative_z, start, end, split = (np.concatenate(column) for column in zip(*found))
    chosen: list[int] = []  # kept sorted: an interval is taken when no split already chosen lies inside it
    for i in np.lexsort((split, end, start, negative_z)):
        at = bisect.bisect_right(chosen, int(start[i]))
        if at == len(chosen) or chosen[at] >= end[i]:
            bisect.insort(chosen, int(split[i]))
    return chosen


def _eliminate_local(y: np.ndarray, w: np.ndarray, sums: _Sums, cps: Sequence[int], alpha: float, width: int,
                     sharp: bool = False) -> list[tuple[int, _Step]]:
    """Drop the weakest failing step until every one holds against its current neighbours."""
    cps = sorted(set(cps))
    n = len(y)
    # a step's test reads its neighbours, and theirs (a short side's bump): tests whose five are unchanged by a
    # drop are taken as they were
    known: dict[tuple[int, ...], _Step | None] = {}
    while True:
        tests = []
        padded = [-1, -1, *cps, -1, -1]
        for i, k in enumerate(cps):
            key = tuple(padded[i:i + 5])
            if key not in known:
                lo, hi = _window(cps, n, i, width)
                known[key] = _sharp_test(y, w, k, lo, hi) if sharp else _short_side_test(y, w, sums, cps, i, width)
            tests.append(known[key])
        p = [1.0 if t is None else t.p_value for t in tests]
        if not cps or max(p) < alpha:
            return [(k, t) for k, t in zip(cps, tests) if t is not None]
        worst = int(np.argmax(p))
        cps = cps[:worst] + cps[worst + 1:]


def _refine(sums: _Sums, cps: Sequence[int], n: int, width: int, reach: int = REACH, margin: int = 3) -> list[int]:
    """Move each step to the split with the largest |t| within ``reach``: segmentation can be a point or two off."""
    out = list(cps)
    for i, k in enumerate(out):
        lo, hi = _window(out, n, i, width)
        near = np.arange(max(lo + margin, k - reach), min(hi - margin, k + reach) + 1)
        if len(near) == 0:
            continue
        d, se, _dof = sums.step(near, lo, hi)
        out[i] = int(near[int(np.argmax(np.abs(d) / se))])
    return sorted(set(out))


def _place(sums: _Sums, cps: Sequence[int], n: int, margin: int, passes: int = PLACE_PASSES) -> list[int]:
    """Each step moved to the least-squares split of the stretch between its neighbours, until none moves.

    Told where its neighbours are, the least-squares split is the maximum-likelihood place of one step in
    gaussian noise (Hinkley 1970); with the neighbours themselves estimated, moving each in turn is coordinate
    ascent on the segmentation's likelihood. Seeded intervals can leave a step several commits off where a
    neighbour pulled its CUSUM, beyond what ``_refine`` reaches.
    """
    out = sorted(set(cps))
    for _ in range(passes):
        moved = False
        for i, k in enumerate(out):
            lo = out[i - 1] if i else 0
            hi = out[i + 1] if i + 1 < len(out) else n
            # no further than halfway to a neighbouring step: a small step beside a large one would otherwise
            # leap onto it and leave that one's place to no step
            first = max(lo + margin, (lo + k + 1) // 2 if i else 0)
            last = min(hi - margin, (k + hi) // 2 if i + 1 < len(out) else n)
            best = _best_split(sums, lo, hi, first, last)
            if best is not None and best != k:
                out[i], moved = best, True
        if not moved:
            break
    return out


def stretch_z(length: int) -> float:
    """``STRETCH_Z`` at ``length``, linear in log length between the tabled ones (beyond them, the last slope)."""
    lengths = np.log([n for n, _ in STRETCH_Z])
    z = np.array([v for _, v in STRETCH_Z])
    at = math.log(max(length, 2))
    if at > lengths[-1]:
        return float(z[-1] + (z[-1] - z[-2]) / (lengths[-1] - lengths[-2]) * (at - lengths[-1]))
    return float(np.interp(at, lengths, z))


def _rank_z(y: np.ndarray, lo: int, hi: int, min_size: int) -> float:
    """Largest |z| of the Mann-Whitney statistic over the splits of ``y[lo:hi]`` (Pettitt 1979)."""
    return float(mann_whitney_z(rank(y[lo:hi]), min_size)[1].max())


def _grow(y: np.ndarray, sums: _Sums, cps: Sequence[int], min_size: int) -> list[int]:
    """Steps added where a stretch between the kept ones still holds one: its least-squares split, when its rank
    statistic passes ``stretch_z`` (binary segmentation from the current segmentation, Vostrikova 1981)."""

    def split(lo: int, hi: int) -> int | None:
        if hi - lo < 2 * min_size or _rank_z(y, lo, hi, min_size) <= stretch_z(hi - lo):
            return None
        return _best_split(sums, lo, hi, lo + min_size, hi - min_size)

    return _grow_stretches(len(y), cps, split)


def _grow_stretches(n: int, cps: Sequence[int], split: Callable[[int, int], int | None]) -> list[int]:
    """``GROW_ROUNDS`` rounds of adding to each stretch between the steps so far the step ``split`` finds in it, if
    any. A stretch that held none holds none the next round either, and is not asked again."""
    out = sorted(set(cps))
    settled: set[tuple[int, int]] = set()
    for _ in range(GROW_ROUNDS):
        added = []
        bounds = [0, *out, n]
        for lo, hi in zip(bounds, bounds[1:]):
            if (lo, hi) in settled:
                continue
            k = split(lo, hi)
            if k is None:
                settled.add((lo, hi))
            else:
                added.append(k)
        if not added:
            break
        out = sorted({*out, *added})
    return out


def floor_gain(x: np.ndarray, lo: int, hi: int, min_size: int) -> tuple[float, int]:
    """The largest floor gain over the splits of ``x[lo:hi]``, and its split: under a floor and a slow tail only,
    the points on the side whose floor is higher × the floors' distance × the density at the floor.

    A side of m values from a density f0 at its floor L has its lowest value u above L with chance exp(−m·f0·u),
    so m·f0·(its lowest − L) is Exp(1) whatever the tail: the likelihood ratio of one step where the noise is
    a delay above a floor (the level is its sample's lowest value, sharper than any mean). f0 is read from the
    stretch: ``FLOOR_SHARE`` of its values lie between its lowest and its ``FLOOR_SHARE`` quantile. The gain is
    Exp(1) at a single split; its largest over the splits passes ``FLOOR_GAIN`` in under 1 % of clean stretches
    (simulated, half-normal and half-t of 2.5 and 5 degrees of freedom, 10-512 points). Normal noise has no floor
    (its lowest values run further out the more there are), so only a series read as one-sided is searched.
    """
    v = x[lo:hi]
    m = len(v)
    if m < 2 * min_size:
        return 0.0, lo
    density = _floor_density(v)
    if density is None:
        return 0.0, lo
    k, lift = _floor_lifts(v, min_size, m - min_size)
    gain = density * lift
    best = int(gain.argmax())
    return float(gain[best]), lo + int(k[best])


def _floor_lifts(v: np.ndarray, first: int, last: int) -> tuple[np.ndarray, np.ndarray]:
    """The splits ``first..last`` of ``v`` and each one's floor gain per unit of density: the points on the side
    whose floor is higher × the floors' distance."""
    before, after = np.minimum.accumulate(v), np.minimum.accumulate(v[::-1])[::-1]
    k = np.arange(first, last + 1)
    left, right = before[k - 1], after[k]
    return k, np.where(right > left, (len(v) - k) * (right - left), k * (left - right))


def _floor_density(v: np.ndarray) -> float | None:
    """The density of ``v`` at its floor: ``FLOOR_SHARE`` of its values lie between its lowest and that quantile;
    None when they are all one value there."""
    low, quantile = float(v.min()), float(quantiles(v, (FLOOR_SHARE,))[0])
    return FLOOR_SHARE / (quantile - low) if quantile > low else None


def floor_step(x: np.ndarray, lo: int, k: int, hi: int) -> tuple[float, _Step]:
    """``floor_gain`` of the one split ``k`` of ``x[lo:hi]`` (how a step already placed is held by its floors), and
    the step read from the floors: each side's lowest value lies above its floor by Exp(its points × the density),
    so that mean is taken off each, and its spread is each one's error (the level of a one-sided series is its
    floor; a mean of its slow tail can even move the other way)."""
    density = _floor_density(x[lo:hi])
    if density is None or not lo < k < hi:
        return 0.0, _Step(0.0, math.inf, 1.0)
    left, right = float(x[lo:k].min()), float(x[k:hi].min())
    gain = density * (hi - k if right > left else k - lo) * abs(right - left)
    # how far each side's lowest value lies above its floor, from that side's own density (a large step makes the
    # stretch's density a blend of the two)
    above_left, above_right = (_above_floor(x[lo:k], density), _above_floor(x[k:hi], density))
    p = FLOOR_ALPHA * math.exp(FLOOR_GAIN - gain) if gain > FLOOR_GAIN else 1.0
    return gain, _Step((right - above_right) - (left - above_left), math.hypot(above_left, above_right), p)


def _above_floor(v: np.ndarray, fallback: float) -> float:
    """The mean of the distance from ``v``'s floor to its lowest value, 1 / (points × density at the floor)."""
    spread = float(quantiles(v, (FLOOR_SHARE,))[0]) - float(v.min())
    return spread / (FLOOR_SHARE * len(v)) if spread > 0 else 1.0 / (fallback * len(v))


def _floor_steps(x: np.ndarray, y: np.ndarray, w: np.ndarray, sums: _Sums, steps: list[int], window: int,
                 min_size: int) -> list[tuple[int, _Step]]:
    """The steps of a floor-and-slow-tail series. One whose floors pass ``FLOOR_GAIN`` between its neighbours is
    held by them, and sized by them: the floors found most of these steps, and a mean barely sees a 2 % step in
    3 % noise (its p-value the smaller of the two tests'). Any other is sized and tested by its windows' means."""
    steps = _floor_place(x, steps, min_size)
    tests = {k: t for k, t in _eliminate_local(y, w, sums, steps, 1.0, window)}
    bounds = [0, *steps, len(x)]
    out = []
    for i, k in enumerate(steps):
        gain, floor = floor_step(x, bounds[i], k, bounds[i + 2])
        if gain > FLOOR_GAIN:
            p = min(floor.p_value, tests[k].p_value) if k in tests else floor.p_value
            out.append((k, _Step(floor.log_step, floor.se, p, held=True)))
        elif k in tests:
            out.append((k, tests[k]))
    return out


def _floor_place(x: np.ndarray, steps: list[int], min_size: int = DEFAULT_MIN_SIZE, reach: int = FLOOR_REACH,
                 margin: int = 3) -> list[int]:
    """Each step moved to where its floors split best within ``reach``, when they pass ``FLOOR_GAIN`` there: least
    squares on a slow tail's means places a small step several commits off. The floors are read ``margin`` commits
    inside the neighbours (a neighbour placed a commit late would lend one side a floor of the next level)."""
    out = list(steps)
    for i in range(len(out)):
        lo = out[i - 1] + margin if i else 0
        hi = out[i + 1] - margin if i + 1 < len(out) else len(x)
        first, last = max(lo + min_size, out[i] - reach), min(hi - min_size, out[i] + reach)
        if first > last:
            continue
        v = x[lo:hi]
        k, lift = _floor_lifts(v, first - lo, last - lo)
        best = int(np.argmax(lift))
        density = _floor_density(v)
        if density is not None and density * float(lift[best]) > FLOOR_GAIN:
            out[i] = lo + int(k[best])
    return out


def _grow_floor(x: np.ndarray, cps: Sequence[int], min_size: int) -> list[int]:
    """Steps added where a stretch's floor moved (``floor_gain`` over ``FLOOR_GAIN``), in a series whose noise is a
    floor and a slow tail: there the lowest values place a level to a fraction of the jitter, where a mean or a rank
    sees a 2 % step in 3 % noise barely or not at all."""

    n = len(x)

    def split(lo: int, hi: int) -> int | None:
        gain, k = floor_gain(x, lo + FLOOR_MARGIN if lo else lo, hi - FLOOR_MARGIN if hi < n else hi, min_size)
        return k if gain > FLOOR_GAIN else None

    return _grow_stretches(n, cps, split)


def _split_costs(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """The cost of each split of the commits searched, given each commit's cost on the level before and after: at
    split j (0..len), the commits before j cost ``before``, the rest ``after``."""
    return np.concatenate([[0.0], np.cumsum(before)]) + np.concatenate([np.cumsum(after[::-1])[::-1], [0.0]])


def _t_place(y: np.ndarray, sigma: float, cps: Sequence[int], margin: int, reach: int = T_REACH) -> list[int]:
    """Each step moved, up to ``reach`` commits, to its most likely place under Student-t noise of scale ``sigma``
    and ``T_DOF`` degrees of freedom, each side's level its median away from the commits searched.

    Least squares is the likeliest place under gaussian noise only: there a point 2.5 deviations out beside a step
    weighs as much as the next six, and a 2 % step in 1 % two-sided t noise was placed four commits early on one
    such point. Under t noise a point far from both levels costs about the same on either side, and no longer
    decides. The levels are held (not fitted per split): a side's median barely moves over the commits searched.
    A step within ``reach + margin`` of a neighbour or an end stays where least squares put it: that side's level
    would be read from the commits searched, and a new step's first few commits at the end of a series would pull
    an early split onto themselves.
    """
    out = sorted(set(cps))
    half = (T_DOF + 1) / 2
    for i, k in enumerate(out):
        lo = out[i - 1] if i else 0
        hi = out[i + 1] if i + 1 < len(out) else len(y)
        first, last = k - reach, k + reach  # margin points beyond either: never past halfway to a neighbour
        if first - margin < lo or last + margin > hi:
            continue
        before, after = y[lo:first], y[last:hi]
        searched = (y[first:last] - np.array([[np.median(before)], [np.median(after)]])) / sigma
        cost = half * np.log1p(searched * searched / T_DOF)  # rows: on the left side's level, on the right's
        total = _split_costs(cost[0], cost[1])
        best = first + int(np.argmin(total))
        if total[best - first] < total[k - first]:
            out[i] = best
    return sorted(set(out))


def _exact_place(x: np.ndarray, y: np.ndarray, sigma: float, steps: list[tuple[int, _Step]], far_side: int = 0,
                 reach: int = REACH, side: int = EXACT_SIDE) -> list[tuple[int, _Step]]:
    """Each step of ``EXACT_STEP`` deviations or more moved, up to ``reach`` commits, to where the raw values split
    between the levels either side of it: each commit costs its squared distance (in noise deviations) from the
    level of its side, at most ``HAMPEL_K`` squared, so a point far from both levels (an episode, a tail) costs the
    same on either side and never decides; ``RARE_SIDE_COST`` times that where it lies on the side the series' far
    values seldom do (``far_side``, from ``_far_side``: +1 above, −1 below, 0 either). A tie leaves the step where
    it was found.

    The cleaning reads a point's level from a running median, and beside a step an episode removed from the window
    can leave its median on the far side: a point just before a 30 % step was cleaned onto the new level, and the
    step named the commit before the one that made it (whose A/B of the two adjacent commits then finds nothing).
    A step this large in its noise shows its commit in every value, so it is placed on the values themselves. It
    keeps the size it was found with: a commit moves a window's mean by a window's share of the step.
    """
    out = list(steps)
    for i, (k, step) in enumerate(out):
        if abs(step.log_step) < EXACT_STEP * sigma:
            continue
        lo = out[i - 1][0] if i else 0
        hi = out[i + 1][0] if i + 1 < len(out) else len(x)
        first, last = max(k - reach, lo + 1), min(k + reach, hi - 1)
        before, after = y[max(lo, first - side):first], y[last:min(hi, last + side)]
        if len(before) < EXACT_MIN_SIDE or len(after) < EXACT_MIN_SIDE or first >= last:
            continue
        searched = (x[first:last] - np.array([[median(before)], [median(after)]])) / sigma
        rare = (np.sign(searched) != far_side) if far_side else np.zeros(searched.shape, dtype=bool)
        cost = np.minimum(searched * searched, np.where(rare, RARE_SIDE_COST, 1.0) * HAMPEL_K * HAMPEL_K)
        total = _split_costs(cost[0], cost[1])
        best = first + int(np.argmin(total))
        if total[best - first] < total[k - first]:
            out[i] = (best, step)
    return out


def _far_side(moved: np.ndarray, sigma: float, steps: Sequence[int], margin: int = EXACT_SIDE) -> int:
    """Which way a series' far values lie from its level — +1 above, −1 below, 0 both ways or too few to say —
    read from ``moved``, raw less cleaned values: the values that lay more than ``HAMPEL_K`` deviations from their
    level were moved by more than ``HAMPEL_K − HUBER_K`` (a normal series has next to none; a Huber clip of a few
    either way, counted, made a gaussian series lopsided by chance). ``detect`` is not told whether a series is of
    times, whose episodes and tails lie above, or of throughputs, whose lie below. Values within ``margin`` commits
    of a step are left out: there the cleaning also moves values of one level towards the other."""
    away = np.ones(len(moved), dtype=bool)
    for k in steps:
        away[max(k - margin, 0):k + margin] = False
    bar = (HAMPEL_K - HUBER_K) * sigma
    above, below = int(np.sum((moved > bar) & away)), int(np.sum((moved < -bar) & away))
    if max(above, below) < FAR_SIDE_MIN or max(above, below) < FAR_SIDE_RATIO * min(above, below):
        return 0
    return 1 if above > below else -1


def _best_split(sums: _Sums, lo: int, hi: int, first: int, last: int) -> int | None:
    """The least-squares split of ``[lo, hi)`` among ``first..last`` (its largest between-sides sum of squares)."""
    near = np.arange(first, last + 1)
    if len(near) == 0:
        return None
    wl, wr = sums.w[near] - sums.w[lo], sums.w[hi] - sums.w[near]
    ok = (wl > 0) & (wr > 0)
    if not ok.any():
        return None
    wl, wr = np.where(ok, wl, 1.0), np.where(ok, wr, 1.0)
    d = (sums.wy[hi] - sums.wy[near]) / wr - (sums.wy[near] - sums.wy[lo]) / wl
    return int(near[int(np.where(ok, d * d * wl * wr / (wl + wr), -1.0).argmax())])


def _mode_split(x: np.ndarray, noise: Noise, y: np.ndarray, w: np.ndarray, positions: Sequence[int], i: int,
                reach: int = MODE_REACH) -> int:
    """Where step ``i`` of a bimodal series lies, read from the raw values: the split within ``reach`` that makes
    the points before it likeliest on either mode of the level before, and those after on either mode after.

    Near a step the modes are misread (the old fast mode sits where the new slow band begins), those points
    weigh little once cleaned, and the weighted test cannot place the step among them.
    """
    n = len(x)
    k = positions[i]
    lo = positions[i - 1] if i else 0
    hi = positions[i + 1] if i + 1 < len(positions) else n
    a, b = max(lo + 2, k - reach), min(hi - 2, k + reach)
    before, after = slice(max(lo, a - 4 * reach), a), slice(b, min(hi, b + 4 * reach))
    if b <= a or a - before.start < 3 or after.stop - b < 3:
        return k
    levels = [weighted_mean(y[part], w[part]) for part in (before, after)]
    spread = max(noise.slow_sigma, noise.sigma)

    def cost(level: float) -> np.ndarray:
        fast = ((x[a:b] - level) / noise.sigma) ** 2
        slow = ((x[a:b] - level - noise.offset) / spread) ** 2 + 2 * math.log(spread / noise.sigma)
        return np.minimum(fast, slow)

    total = _split_costs(cost(levels[0]), cost(levels[1]))
    splits = np.arange(a, b + 1)
    best = np.flatnonzero(total <= total.min() + 1e-9)
    return int(splits[best[np.argmin(np.abs(splits[best] - k))]])


def _mix_changes(slow: np.ndarray, min_size: int) -> list[tuple[int, float]]:
    """Where the share of slow-mode points moved: binary segmentation of a binomial CUSUM, Bonferroni per stretch."""
    m = slow.astype(float)
    found: list[tuple[int, float]] = []
    stack = [(0, len(m))]
    while stack:
        start, end = stack.pop()
        n = end - start
        share = float(m[start:end].mean()) if n else 0.0
        if n < 2 * min_size or share <= 0.0 or share >= 1.0:
            continue
        k = np.arange(min_size, n - min_size + 1)
        left = np.cumsum(m[start:end])[k - 1]
        right = m[start:end].sum() - left
        scale = np.sqrt(share * (1 - share) * (1 / k + 1 / (n - k)))
        best = int(np.argmax(np.abs(left / k - right / (n - k)) / scale))
        kb, lb, rb = int(k[best]), float(left[best]), float(right[best])
        # a short side's surplus of slow points must outlast one episode of a noisy neighbour
        if kb < SHORT_SIDE and lb / kb > rb / (n - kb):
            lb = max(lb - EPISODE, 0.0)
        elif n - kb < SHORT_SIDE and rb / (n - kb) > lb / kb:
            rb = max(rb - EPISODE, 0.0)
        p = float(2 * special.ndtr(-abs(lb / kb - rb / (n - kb)) / scale[best])) * len(k)
        if p >= MIX_ALPHA:
            continue
        split = start + int(k[best])
        found.append((split, min(p, 1.0)))
        stack += [(start, split), (split, end)]
    return sorted(found)


def detect(values: Sequence[float] | np.ndarray, *, alpha: float = DEFAULT_ALPHA,
           min_effect: float = DEFAULT_MIN_EFFECT, min_size: int = DEFAULT_MIN_SIZE,
           window: int = DEFAULT_WINDOW) -> list[ChangePoint]:
    """Change points of one series, oldest value first."""
    raw = np.asarray(values, dtype=float)
    rows = np.flatnonzero(np.isfinite(raw) & (raw > 0))
    if len(rows) < 2 * min_size:
        return []
    x = np.log(raw[rows])
    noise = read_noise(x, min_size)
    y, w, steps = _level_steps(x, noise, alpha, min_size, window)
    if noise.bimodal and steps:
        # read the modes again within the steps just found (placed on the raw values, see _mode_split), and
        # look again with them
        first = [k for k, _ in steps]
        noise = read_noise(x, min_size, sorted({_mode_split(x, noise, y, w, first, i) for i in range(len(first))}))
        y, w, steps = _level_steps(x, noise, alpha, min_size, window)
        if noise.bimodal:
            # and placed on the raw values once more, a little way: with the modes read within the final steps,
            # the two-mode cost places a small step where the cleaned values' least squares leave it a few off
            placed = [k for k, _ in steps]
            for i in range(len(placed)):
                placed[i] = _mode_split(x, noise, y, w, placed, i, MODE_PLACE_REACH)
            steps = [(k, step) for k, (_, step) in zip(placed, steps)]
    # a step found by growing must hold in its own windows once placed (a floor step by its floors, _floor_steps): the
    # rank statistic that grew it can be carried by a new step's first commits at the very end, which the cleaning
    # clips, and the split it added lies elsewhere. Only here, at the end: a bimodal series' modes are read again
    # within every step found first, held or not
    steps = [(k, step) for k, step in steps if step.held or step.p_value < GROWN_ALPHA]
    if not noise.bimodal:  # a bimodal series' stretches hold two modes: their spread says nothing of episodes
        mixed = _mixed_bumps(x, noise.sigma, [k for k, _ in steps])
        steps = [(k, step) for k, step in steps if k not in mixed]
        # ... and its steps were placed on the raw values by their modes (_mode_split)
        steps = _exact_place(x, y, noise.sigma, steps, _far_side(x - y, noise.sigma, [k for k, _ in steps]))
    positions = [k for k, _ in steps]
    found = [_location(raw, rows, y, w, noise, positions, i, step, window) for i, (_, step) in enumerate(steps)]
    if noise.bimodal:
        mixes = [(k, p) for k, p in _mix_changes(noise.slow, min_size) if all(abs(k - c) > MIX_APART for c in positions)]
        found += [_mix(rows, y, noise, sorted([*positions, *(k for k, _ in mixes)]), k, p, window) for k, p in mixes]
    return sorted((cp for cp in found if abs(cp.change_pct) >= 100 * min_effect), key=lambda cp: cp.index)


def _level_steps(x: np.ndarray, noise: Noise, alpha: float, min_size: int, window: int
                 ) -> tuple[np.ndarray, np.ndarray, list[tuple[int, _Step]]]:
    """Cleaned values, their weights, and the level steps found in them (with drift modelled when it wins)."""
    n = len(x)
    y, w = clean(x, noise)
    sums = _Sums(y, w)
    candidates = _candidates(sums, noise.sigma, n, min_size)
    if not candidates:
        return y, w, []  # no step to keep, with drift or without
    level = [k for k, _ in _eliminate_local(y, w, sums, candidates, alpha, window)]
    kept = [k for k, _ in _eliminate_local(y, w, sums, _refine(sums, level, n, window), alpha, window)]
    grown = _place(sums, _grow(y, sums, kept, min_size), n, min_size)
    if not noise.bimodal:
        # a floor and a slow tail: the steps that least squares saw, and those its lowest values show. Drift is
        # not looked for: a floor's small steps barely move the cleaned values' fit, and would lose to any curve.
        # Steps least squares missed spread the floor of the stretches that hold them: a series whose low side
        # is short already is read again with the floor's own steps. A one-sided series' floor_ratio is under
        # noise.ONE_SIDED, below NEAR_FLOOR, so most series stop at the first, cheaper test
        bounds = [0, *grown, n]
        if floor_ratio(x, bounds) < NEAR_FLOOR:
            if one_sided(x, bounds):
                return y, w, _floor_steps(x, y, w, sums, _grow_floor(x, grown, min_size), window, min_size)
            floored = _grow_floor(x, grown, min_size)
            if floored != grown and one_sided(x, [0, *floored, n]):
                return y, w, _floor_steps(x, y, w, sums, floored, window, min_size)
    regression = drift.Regression(y, w)
    # the drift-free account is judged with every step it would report, the rank test's grown ones too: a stretch's
    # rank split sees a trend's two halves as two levels, and judged without them it beat the drift, then reported them
    choice = drift.choose(regression, sorted({*candidates, *grown}), sorted({*level, *grown}))
    if choice.columns is None:
        # placed last under a heavy-tailed likelihood: least squares lets one point a few deviations out beside a
        # step (what the Huber clip leaves of an outlier) pull the split several commits
        grown = _t_place(y, noise.sigma, grown, min_size)
        tests = {k: t for k, t in _eliminate_local(y, w, sums, grown, 1.0, window)}
        return y, w, [(k, tests[k]) for k in grown if k in tests]
    sharp = [k for k, _ in _eliminate_local(y, w, sums, level, SHARP_ALPHA, SHARP_WINDOW, sharp=True)]
    kept = regression.eliminate(sorted(set(choice.fit.steps) | set(sharp)), choice.columns, SHARP_ALPHA).steps
    kept = _refine(sums, kept, n, SHARP_WINDOW)
    while True:  # a side of a few commits must not be one episode of a noisy neighbour
        bumps = [_bump(sums, kept, i, window) for i in range(len(kept))]
        short = [_Step(0.0, 1.0, 0.0) if bump is None else _episode_test(y, w, k, *bump) for k, bump in zip(kept, bumps)]
        p = [1.0 if t is None else t.p_value for t in short]
        if not kept or max(p) < alpha:
            break
        kept.pop(int(np.argmax(p)))
    # sized with the drift in: a step on a slope is not the difference of the windows' means
    fit = regression.eliminate(kept, choice.columns, alpha)
    return y, w, [(k, _Step(d, se, p)) for k, d, se, p in zip(fit.steps, fit.log_steps, fit.ses, fit.p_values)]


def _modes(level: float, noise: Noise, slow: np.ndarray, lo: int, k: int, hi: int
           ) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    if not noise.bimodal:
        return None, None
    return (level, level * math.exp(noise.offset)), (float(slow[lo:k].mean()), float(slow[k:hi].mean()))


def _location(raw: np.ndarray, rows: np.ndarray, y: np.ndarray, w: np.ndarray, noise: Noise, positions: list[int],
              i: int, step: _Step, window: int) -> ChangePoint:
    k = positions[i]
    lo, hi = _window(positions, len(y), i, window)
    before = float(np.exp(weighted_mean(y[lo:k], w[lo:k])))
    after = before * math.exp(step.log_step)
    half = 1.96 * step.se
    modes, shares = _modes(before, noise, noise.slow, lo, k, hi)
    return ChangePoint(
        index=int(rows[k]), before=before, after=after, change_pct=math.expm1(step.log_step) * 100.0,
        p_value=step.p_value, ci_low=math.expm1(step.log_step - half) * 100.0,
        ci_high=math.expm1(step.log_step + half) * 100.0, modes=modes, slow_share=shares)


def _mix(rows: np.ndarray, y: np.ndarray, noise: Noise, changes: list[int], k: int, p_value: float,
         window: int) -> ChangePoint:
    """A move of the slow mode's share, sized as the move of the geometric mean it makes."""
    i = changes.index(k)
    lo, hi = _window(changes, len(y), i, window)
    before_share, after_share = float(noise.slow[lo:k].mean()), float(noise.slow[k:hi].mean())
    fast = float(np.exp(np.median(y[lo:k])))
    log_change = (after_share - before_share) * noise.offset
    se = noise.offset * math.sqrt(before_share * (1 - before_share) / (k - lo) + after_share * (1 - after_share) / (hi - k))
    before = fast * math.exp(before_share * noise.offset)
    return ChangePoint(
        index=int(rows[k]), before=before, after=before * math.exp(log_change),
        change_pct=math.expm1(log_change) * 100.0, p_value=p_value,
        ci_low=math.expm1(log_change - 1.96 * se) * 100.0, ci_high=math.expm1(log_change + 1.96 * se) * 100.0,
        shift="mix", modes=(fast, fast * math.exp(noise.offset)), slow_share=(before_share, after_share))
