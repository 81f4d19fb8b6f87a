"""What one benchmark series shows about its own noise: its scale, its modes, its outliers.

Timings are log-values here (``x = log(t)``), so every scale is relative. Three things are read
from the series itself, each robust to the steps it may hold:

- **scale**: the MAD of first differences / √2 (a step moves one difference, an outlier two);
- **modes**: a GPU kernel's per-process median lands near a fast mode or in a slow band far
  above it (``../shared/corpus/gpu-h200``: 70 µs vs 95-118 µs), an autotuner picks one of two
  configurations. Each stretch between robust level shifts (Mann-Whitney binary segmentation,
  blind to how the noise is shaped; where no single shift stands out of the whole series, the
  stretch whose ranks do, or the split where their distribution moves) is split in two by 1-D
  2-means (Fisher's exact grouping for one dimension); when most of the series splits cleanly —
  a gap of ``MODE_SEPARATION`` within-cluster deviations, each side at least ``MODE_SHARE`` of
  its stretch — each point is labelled fast or slow, and the slow mode's offset and spread are measured — unless the slow
  points sit together in a few long runs (Wald-Wolfowitz, ``RUNS_Z``): a process's mode is drawn
  afresh each run, a bump of a dozen commits is a level that moved; and a stretch that holds a
  run of one mode too long for its share, on a level of its own, is cut there (``_run_cuts``);
- **a floor**: a series whose every run is a floor plus a slow delay (``one_sided``: its low side
  short against the bulk, its density flat up to the floor) shows a level in its lowest values,
  which the change-point search then reads (``changepoints.floor_gain``);
- **outliers**: within each mode, a point further than ``HAMPEL_K`` deviations from its running
  median (Hampel filter, Pearson 2002; windows at the ends hold only the points there, and
  within 3 commits of an end the 15-point level decides — unless ``END_RUN`` or more of the mode's points in a
  row at that end lie beyond it the same way, a level of their own) is replaced by that median, and the rest are
  clipped at ``HUBER_K`` deviations (Huber's winsorising), so a noisy neighbour or a heavy tail moves no mean.

``clean`` then gives the series a step test can use: slow points moved down by the slow mode's
offset, and weights 1/variance, so a broad slow band barely counts while a tight autotuner mode
counts fully. Locations are then compared on the fast mode, which is where a kernel's code shows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import special

from roofwatch.service.analysis.arrays import median, quantiles

MAD_TO_SD = 1.4826  # MAD of a normal sample × this = its standard deviation
MODE_SEPARATION = 3.5  # gap between two modes over the spread within them (an autotuner 4 % apart in 1 % noise is two modes)
MODE_SHARE = 0.05  # the smaller mode of a stretch holds at least this share of it
MODE_COVERAGE = 0.5  # share of the series in stretches that split cleanly, for it to be bimodal
MODE_MIN_STRETCH = 8  # points a stretch needs before its modes are read
ROUGH_ALPHA = 1e-3  # per stretch, for the level shifts that stretches are cut at
BUMP_GRID = 50  # positions at most each end of a bump is searched on, per stretch (rank_shifts)
SHIFT_GRID = 64  # rank thresholds and splits at most a shift of the distribution is read at (rank_shifts)
SHIFT_MIN_STRETCH = 64  # commits a part already cut at a level shift needs before its distribution is read: a linear
# drift of 4 % over 200 commits in 1 % noise, cut at its distribution's shifts down to 32-48 commits, read as two modes
HAMPEL_HALF_WIDTH = 3  # a running median over 7 points forgets episodes of up to 3 commits
HAMPEL_K = 4.0
LEVEL_HALF_WIDTH = 7  # the level outliers are replaced by and clipped towards: 15 points, so a few
# points of an unrecognised second mode in a row do not carry it
HUBER_K = 2.5
END_RUN = 4  # points of one mode in a row at an end, all beyond the level the same way: more than an episode (1-3 commits)
MODE_RUN_P = 1e-2  # a run of one mode this unlikely at its share is tested as a level (_run_cuts; seeds 0-39)
MODE_RUN_ROUNDS = 3  # times the modes are read again with the cuts such runs give
RUNS_Z = -6.0  # slow points this much more bunched than interleaved modes would be are a moved level (or a drift cut in two)
ONE_SIDED = 0.8  # floor_ratio under this: a floor and a slow tail (slow-tail histories 0.51-0.93, other unimodal kinds ≥ 0.88)
FLAT_FLOOR = 1.5  # ... and floor_flatness under this (slow-tail histories: median 1.0, 90 % under 1.5; t lower tails ≥ 2.5)
SCALE_FLOOR = 1e-9  # a series of identical values still gets a finite scale
KEPT_STRETCH = 512  # stretch lengths up to this keep their Mann-Whitney null scale: every one of a 500-commit series


def robust_sigma(x: np.ndarray) -> float:
    """Noise scale that steps, drift and outliers barely move: MAD of first differences / √2."""
    if len(x) < 3:
        return 0.0
    d = np.diff(x)
    return float(MAD_TO_SD * median(np.abs(d - median(d))) / math.sqrt(2))


def _pad(x: np.ndarray, half_width: int) -> np.ndarray:
    """``x`` padded with NaN, so a window at an end holds only the points that are there: padding with the end
    value gives one or two slow runs at the very end a majority of their own window, mirroring doubles the
    runs just before the end."""
    out = np.full(len(x) + 2 * half_width, np.nan)  # np.pad's generality costs ten times this
    out[half_width:half_width + len(x)] = x
    return out


def running_median(x: np.ndarray, half_width: int = HAMPEL_HALF_WIDTH) -> np.ndarray:
    """Median of each point's ``2 * half_width + 1`` neighbourhood (fewer at the ends); NaNs skipped, NaN when none.

    The midpoint of ``running_median_bounds``: the same numbers ``np.nanmedian`` gives, from one sort of the
    windows instead of a masked median per window, which cost a tenth of a series' analysis.
    """
    low, high = running_median_bounds(x, half_width)
    return (low + high) / 2


def running_median_bounds(x: np.ndarray, half_width: int) -> tuple[np.ndarray, np.ndarray]:
    """The two middle values of each point's neighbourhood, NaNs skipped (equal for an odd count; NaN when none).

    Any value between them is a median. Beside a step, with a suspect dropped from the window and half of
    it on either side, their average lies midway up the step: a point cleaned towards it becomes an outlier
    the cleaning made, so ``clean`` takes the bound nearest to the point's own value instead.
    """
    width = 2 * half_width + 1
    padded = _pad(x, half_width)
    # every window as a row of a strided view of ``padded``, only read (sliding_window_view's checks cost a third of
    # the sort)
    windows = np.ndarray((len(x), width), padded.dtype, padded, 0, (padded.itemsize, padded.itemsize))
    window = np.sort(windows, axis=1)  # NaNs last
    present = np.concatenate([[0], (~np.isnan(padded)).cumsum()])
    count = present[width:] - present[:-width]  # values in each window: a running sum, not a pass over the windows
    rows = np.arange(len(x))
    low = window[rows, np.maximum(count - 1, 0) // 2]
    high = window[rows, count // 2] if len(x) else low
    return low, np.where(count > 0, high, np.nan)


def rank(values: np.ndarray) -> np.ndarray:
    """Each value's rank, 1 to n (ties by order)."""
    out = np.empty(len(values))
    out[values.argsort(kind="stable")] = np.arange(1, len(values) + 1)
    return out


def mann_whitney_z(ranks: np.ndarray, min_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The splits of a stretch with at least ``min_size`` points each side, and the |z| of the Mann-Whitney
    statistic of each (Pettitt 1979), from the ranks of its values."""
    n = len(ranks)
    k, offset, mean, scale = (_kept_mann_whitney if n <= KEPT_STRETCH else _mann_whitney)(n, min_size)
    u = ranks.cumsum()[k - 1] - offset
    return k, np.abs((u - mean) / scale)


def _mann_whitney(n: int, min_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The splits of a stretch of ``n`` and, per split, what the statistic's null mean and scale need."""
    k = np.arange(min_size, n - min_size + 1)
    return k, k * (k + 1) / 2.0, k * (n - k) / 2.0, np.sqrt(k * (n - k) * (n + 1) / 12.0)


@lru_cache(maxsize=KEPT_STRETCH)
def _kept_mann_whitney(n: int, min_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``_mann_whitney``, kept for every stretch length up to ``KEPT_STRETCH`` (read-only: the same for every
    stretch this long): 8 MB at most."""
    out = _mann_whitney(n, min_size)
    for array in out:
        array.flags.writeable = False
    return out


def rank_shifts(x: np.ndarray, min_size: int, alpha: float = ROUGH_ALPHA) -> list[int]:
    """Level shifts by binary segmentation on the Mann-Whitney statistic (Pettitt 1979), Bonferroni per stretch.

    Ranks make it indifferent to the noise's shape (modes, tails), which is what reading the
    modes needs before anything else is known. A GPU series' changes can leave the mean rank where it was: its
    slow share rises, then every mode falls (a bump whose sides cancel), or every mode moves by more than the gap
    between them (the old fast mode amid the new slow band). Where no location split passes, the whole series is
    cut at a bump of its ranks (``_rank_bump``), and it or any part of at least ``SHIFT_MIN_STRETCH`` commits at
    the split where its values' distribution moves most (``_distribution_shift``).
    """
    found: list[int] = []
    stack = [(0, len(x))]
    while stack:
        start, end = stack.pop()
        n = end - start
        if n < 2 * min_size:
            continue
        ranks = rank(x[start:end])
        k, z = mann_whitney_z(ranks, min_size)
        best = int(z.argmax())
        if z[best] >= -special.ndtri(alpha / (2 * len(k))):
            split = start + int(k[best])
        elif n < min(len(x), SHIFT_MIN_STRETCH):
            continue  # a short part, cut at a level shift already: a drift's pieces split as cleanly as two modes
        else:
            # a bump is looked for over the whole series only: in the parts of a drift it finds the drift's
            # turns, and the short pieces it leaves split by 2-means as cleanly as two modes
            bump = _rank_bump(ranks, min_size, alpha) if n == len(x) else None
            if bump is not None:
                first, last = start + bump[0], start + bump[1]
                found += [first, last]
                stack += [(start, first), (first, last), (last, end)]
                continue
            shift = _distribution_shift(ranks, k, alpha)
            if shift is None:
                continue
            split = start + shift
        found.append(split)
        stack += [(start, split), (split, end)]
    return sorted(found)


@lru_cache(maxsize=1024)  # a stretch of every length a long series is cut into
def _thresholds(n: int) -> np.ndarray:
    """``SHIFT_GRID`` rank thresholds at most, spread over ``1..n`` (read-only: shared by every stretch this long).
    A step of at least one rank apart, so no two round to the same one."""
    out = np.linspace(1, n, min(n, SHIFT_GRID)).round()
    out.flags.writeable = False
    return out


def _distribution_shift(ranks: np.ndarray, k: np.ndarray, alpha: float) -> int | None:
    """The split of the splits ``k`` where the two sides' distributions differ most, when it
    passes ``alpha`` Bonferroni over the splits tried; else None. Two-sample Kolmogorov-Smirnov on ranks, read at
    ``SHIFT_GRID`` rank thresholds and splits at most, then placed exactly within a grid step.

    A GPU series whose every mode moved by more than the gap between them holds about the same mean rank either
    side — the old fast mode amid the new slow band — and no location split shows it; its two sides' values barely
    overlap, which the largest gap between their distribution functions does.
    """
    n = len(ranks)
    thresholds = _thresholds(n)
    bucket = thresholds.searchsorted(ranks)  # the first threshold at or above each point's rank
    stride = max(1, math.ceil(len(k) / SHIFT_GRID))
    blocks = (n + stride - 1) // stride
    counts = np.bincount(np.arange(n) // stride * (len(thresholds) + 1) + bucket,
                         minlength=blocks * (len(thresholds) + 1)).reshape(blocks, -1)[:, :-1]
    # points before each block's end at or under each threshold
    below = counts.cumsum(axis=0).cumsum(axis=1)

    def strength(splits: np.ndarray, under: np.ndarray) -> np.ndarray:
        left, right = splits[:, None].astype(float), (n - splits)[:, None].astype(float)
        gap = np.abs(under / left - (thresholds[None, :] - under) / right).max(axis=1)
        return (splits * (n - splits) / n) * gap * gap  # Kolmogorov's tail: P(D > d) ≈ 2 exp(-2 m d²)

    ends = np.arange(1, blocks + 1) * stride
    tried = (ends >= k[0]) & (ends <= k[-1])
    if not tried.any():
        return None
    scores = strength(ends[tried], below[tried])
    best = int(scores.argmax())
    if scores[best] <= -0.5 * math.log(alpha / (2 * int(tried.sum()))):
        return None
    # exact within a grid step: each nearby split's counts, from the block end before it
    at = int(ends[tried][best])
    near = np.arange(max(int(k[0]), at - stride + 1), min(int(k[-1]), at + stride - 1) + 1)
    start = near[0] - 1
    before = np.sum(ranks[:start, None] <= thresholds[None, :], axis=0)  # points before ``start`` under each
    steps = np.cumsum(ranks[start:near[-1], None] <= thresholds[None, :], axis=0)
    return int(near[int(np.argmax(strength(near, before + steps)))])


def _rank_bump(ranks: np.ndarray, min_size: int, alpha: float) -> tuple[int, int] | None:
    """The stretch ``[i, j)`` whose ranks stand out of the rest's (circular binary segmentation, Olshen et al. 2004,
    on the Mann-Whitney statistic), when one passes ``alpha`` Bonferroni over the pairs tried; else None.

    A bump whose two sides cancel — a GPU series whose slow share rose, then whose every mode fell below where it
    was — leaves no single split that stands out, and the modes of the whole series read as a level that moved.
    Its ends are searched on a grid of ``BUMP_GRID`` positions at most, then placed exactly within a grid step.
    """
    n = len(ranks)
    if n < 3 * min_size:
        return None
    stride = max(1, math.ceil((n - 2 * min_size) / BUMP_GRID))
    prefix = np.concatenate([[0.0], np.cumsum(ranks - (n + 1) / 2.0)])  # centred: a stretch's sum is its surplus

    def z2(first: np.ndarray, last: np.ndarray) -> np.ndarray:
        length = last[None, :] - first[:, None]
        surplus = prefix[last][None, :] - prefix[first][:, None]
        inside = np.maximum(length, 1)
        out = surplus * surplus / (inside * np.maximum(n - inside, 1) * (n + 1) / 12.0)
        return np.where(length >= min_size, out, 0.0)

    grid = np.arange(min_size, n - min_size + 1, stride)
    scores = z2(grid, grid)
    tried = int(np.count_nonzero(grid[None, :] - grid[:, None] >= min_size))
    at = int(np.argmax(scores))
    if not tried or scores.flat[at] < special.ndtri(alpha / (2 * tried)) ** 2:
        return None
    first, last = (int(grid[a]) for a in divmod(at, len(grid)))
    near_first = np.arange(max(min_size, first - stride + 1), first + stride)
    near_last = np.arange(last - stride + 1, min(n - min_size, last + stride - 1) + 1)
    scores = z2(near_first, near_last)
    a, b = divmod(int(np.argmax(scores)), len(near_last))
    return int(near_first[a]), int(near_last[b])


@dataclass(frozen=True)
class Split:
    """The best two-group split of a stretch (1-D 2-means, exact by sorting)."""

    low: float  # mean of the lower group
    high: float
    within: float  # pooled standard deviation within the groups
    smaller: int  # points in the smaller group
    size: int

    @property
    def clean(self) -> bool:
        return (self.within > 0 and self.high - self.low >= MODE_SEPARATION * self.within
                and self.smaller >= max(2.0, MODE_SHARE * self.size))


def two_groups(values: np.ndarray) -> Split:
    v = np.sort(values)
    n = len(v)
    sums = v.cumsum()
    i = np.arange(1, n)
    low, high = sums[:-1] / i, (sums[-1] - sums[:-1]) / (n - i)
    best = int((i * (n - i) * (high - low) ** 2).argmax())
    lo, hi = v[:best + 1], v[best + 1:]
    within = math.sqrt((((lo - lo.mean()) ** 2).sum() + ((hi - hi.mean()) ** 2).sum()) / max(n - 2, 1))
    return Split(float(lo.mean()), float(hi.mean()), within, min(len(lo), len(hi)), n)


@dataclass(frozen=True)
class Noise:
    """A series' noise: its (fast-mode) scale and, for a bimodal series, which points are slow."""

    sigma: float  # log units: the spread of the only mode, or of the fast one
    slow: np.ndarray  # bool per point: on the slow mode
    offset: float = 0.0  # log distance of the slow mode above the fast one
    slow_sigma: float = 0.0

    @property
    def bimodal(self) -> bool:
        return bool(self.slow.any())


def floor_ratio(x: np.ndarray, bounds: Sequence[int]) -> float:
    """How far the low side reaches against the bulk: (median − 5th percentile) / interquartile range of the values
    about each stretch's median (stretches between ``bounds``).

    1.22 for normal noise, more under two-sided tails, about 1.2 with slow episodes (they move neither the low side
    nor the quartiles much); 0.65-0.75 when every run is the floor plus a slow delay (half-normal, half-t).
    """
    residual = np.concatenate([x[s:e] - median(x[s:e]) for s, e in zip(bounds, bounds[1:]) if e > s])
    q05, q25, q50, q75 = quantiles(residual, (0.05, 0.25, 0.5, 0.75))
    return float((q50 - q05) / (q75 - q25)) if q75 > q25 else math.inf


def floor_flatness(x: np.ndarray, bounds: Sequence[int]) -> float:
    """How flat the density is at the lowest values: (20th − 1st percentile) / (40th − 20th percentile) of the values
    about each stretch's median (stretches between ``bounds``).

    0.9 where the density is flat up to the floor (half-normal; half-t alike), 2.5 for a normal lower tail and more
    for a heavier one: two modes the mode reading did not separate give a small ``floor_ratio`` too, but the fast
    mode's lower tail is no floor.
    """
    residual = np.concatenate([x[s:e] - median(x[s:e]) for s, e in zip(bounds, bounds[1:]) if e > s])
    q01, q20, q40 = quantiles(residual, (0.01, 0.2, 0.4))
    return float((q20 - q01) / (q40 - q20)) if q40 > q20 else math.inf


def one_sided(x: np.ndarray, bounds: Sequence[int]) -> bool:
    """Is the noise of log-values ``x`` a floor and a slow tail (every run the floor plus a delay), given the level
    steps at ``bounds``? The low side reaches a short way against the bulk, and the density is flat up to it."""
    return floor_ratio(x, bounds) < ONE_SIDED and floor_flatness(x, bounds) < FLAT_FLOOR


def runs_z(labels: np.ndarray) -> float:
    """Wald-Wolfowitz runs test: z of the number of runs of equal labels against independent labels.

    A process's mode is drawn afresh each run, so modes interleave; "slow" points that sit together in a
    few long runs are a level that moved (a bump of a dozen commits), not a second mode.
    """
    n = len(labels)
    ones = float(labels.sum())
    zeros = n - ones
    runs = 1 + int(np.count_nonzero(labels[1:] != labels[:-1]))
    mean = 1 + 2 * ones * zeros / n
    var = 2 * ones * zeros * (2 * ones * zeros - n) / (n * n * (n - 1))
    return (runs - mean) / math.sqrt(var) if var > 0 else 0.0


def read_noise(x: np.ndarray, min_size: int, steps: Sequence[int] | None = None) -> Noise:
    """The noise model of log-values ``x``; ``slow`` is all False for a unimodal series.

    Stretches are cut at ``steps`` (level steps already found) when given, else at rank shifts:
    a rank shift near a step smaller than the modes' gap can land a few points off, and the
    stretch that straddles the step then reads part of it as the other mode. A stretch whose
    labels hold a run of one mode too long for the modes' shares, and whose run's fast level lies
    apart from the stretch's, is cut where the run begins and ends, and the modes read again.
    """
    n = len(x)
    bounds = sorted({0, *(rank_shifts(x, min_size) if steps is None else steps), n})
    for _ in range(MODE_RUN_ROUNDS):
        noise = _read_modes(x, bounds)
        cuts = _run_cuts(x, noise, bounds) if noise.bimodal else []
        if not cuts:
            return noise
        bounds = sorted({*bounds, *cuts})
    return _read_modes(x, bounds)


def _read_modes(x: np.ndarray, bounds: Sequence[int]) -> Noise:
    """The modes of ``x`` read within each stretch between ``bounds`` (``read_noise``, one reading)."""
    n = len(x)
    sigma = max(robust_sigma(x), SCALE_FLOOR)
    unimodal = Noise(sigma, np.zeros(n, dtype=bool))
    stretches = [(s, e, two_groups(x[s:e])) for s, e in zip(bounds, bounds[1:]) if e - s >= MODE_MIN_STRETCH]
    split = [(s, e, g) for s, e, g in stretches if g.clean]
    if sum(e - s for s, e, _ in split) < MODE_COVERAGE * n:
        return unimodal
    gap = float(np.median([g.high - g.low for _, _, g in split]))
    fast_level = np.empty(n)
    for s, e in zip(bounds, bounds[1:]):
        group = next((g for gs, ge, g in split if gs == s and ge == e), None)
        # a stretch that did not split cleanly (short, or one mode only) is centred on its median
        fast_level[s:e] = group.low if group is not None else median(x[s:e])
    residual = x - fast_level
    slow = residual > gap / 2
    if slow.sum() < 3 or (~slow).sum() < 3 or runs_z(slow) < RUNS_Z:
        return unimodal
    offset = median(residual[slow])
    fast_sigma = max(robust_sigma(x[~slow]), SCALE_FLOOR)
    slow_sigma = MAD_TO_SD * median(np.abs(residual[slow] - offset))
    return Noise(fast_sigma, slow, offset, max(slow_sigma, fast_sigma))


def _run_cuts(x: np.ndarray, noise: Noise, bounds: Sequence[int]) -> list[int]:
    """Where a stretch's runs of one label begin and end, when a run is too long for that label's share of the series
    (chance under ``MODE_RUN_P``; within a stretch, over every place a run could start) and its own fast level lies
    apart from the stretch's.

    A level that moved by about the modes' gap inside a stretch reads as one mode for all its commits: the old
    fast level becomes the new slow mode, or the new slow band the old fast one. A process draws its mode afresh
    each run, so a dozen commits of one mode in a row at a share of a third is a level, not a mode; the runs test
    (``RUNS_Z``) reads the whole series, where the mixed stretches around such a run dilute it. A GPU's slow share
    moves too (a mix change), and its runs of slow points then keep the stretch's fast level when they hold both
    modes, or spread as wide as the slow band when they hold only it: neither is cut.
    """
    slow = noise.slow
    n = len(slow)
    slow_points = int(np.count_nonzero(slow))
    count = {True: slow_points, False: n - slow_points}  # points of each label
    wide = (noise.sigma + noise.slow_sigma) / 2  # a run this spread out is the slow band, not a level
    apart = max(noise.offset / 4, MODE_SEPARATION * noise.sigma)
    cuts: list[int] = []
    for s, e in zip(bounds, bounds[1:]):
        labels = slow[s:e]
        edges = [0, *(np.flatnonzero(labels[1:] != labels[:-1]) + 1).tolist(), e - s]
        if len(edges) == 2:
            continue  # one label throughout: nothing to cut the stretch at
        stretch_level: float | None = None  # the stretch's fast level, read once a run needs it
        for start, stop in zip(edges, edges[1:]):
            length = stop - start
            if length < MODE_MIN_STRETCH:
                continue
            inner = 0 < start and stop < e - s  # a run in mid-stretch could have started at any of its commits
            share = (count[bool(labels[start])] - length) / (n - length)
            if share ** length * ((e - s) if inner else 1) >= MODE_RUN_P:
                continue
            values = x[s + start:s + stop]
            groups = two_groups(values)
            if groups.clean and abs(groups.high - groups.low - noise.offset) > noise.offset / 3:
                continue  # two groups, but not the series' two modes: a wide slow band cut in two
            if not groups.clean and (inner or robust_sigma(values) > wide):
                continue  # one mode only: the slow band's spread, or a level's, told apart at a stretch's ends only
            if stretch_level is None:
                stretch = two_groups(x[s:e])
                stretch_level = stretch.low if stretch.clean else median(x[s:e])
            if abs((groups.low if groups.clean else median(values)) - stretch_level) > apart:
                cuts += [s + i for i in (start, stop) if 0 < i < e - s]
    return cuts


def runs_at_ends(deviation: np.ndarray, bar: float, length: int = END_RUN) -> np.ndarray:
    """The points of the runs, at either end, of at least ``length`` deviations beyond ``bar``, all the same way."""
    beyond = np.sign(deviation) * (np.abs(deviation) > bar)  # -1, 0 or +1 per point
    out = np.zeros(len(deviation), dtype=bool)
    for order in (slice(None), slice(None, None, -1)):  # from the start, then from the end
        side, marks = beyond[order], out[order]
        other = np.flatnonzero(side != side[0]) if len(side) else np.zeros(0, dtype=int)
        count = int(other[0]) if len(other) else len(side)
        if count >= length and side[0] != 0:
            marks[:count] = True  # a view: writes into ``out``
    return out


def _end_deviations(values: np.ndarray, half_width: int) -> np.ndarray:
    """Each value less its running median, within ``4 × half_width + 1`` points of either end (zero between): a run
    longer than that at an end is its window's majority, and needs no looking for."""
    reach = 4 * half_width + 1  # every window of these points lies within the first (last) reach + half_width
    if len(values) <= 2 * (reach + half_width):
        return values - running_median(values, half_width)
    out = np.zeros(len(values))
    head, tail = values[:reach + half_width], values[-reach - half_width:]
    out[:reach] = (head - running_median(head, half_width))[:reach]
    out[-reach:] = (tail - running_median(tail, half_width))[-reach:]
    return out


def clean(x: np.ndarray, noise: Noise) -> tuple[np.ndarray, np.ndarray]:
    """Values on the fast mode's scale, Hampel-filtered and winsorised per mode, and their weights (1/variance, fast = 1)."""
    y = x - noise.offset * noise.slow
    weight = np.where(noise.slow, (noise.sigma / max(noise.slow_sigma, noise.sigma)) ** 2, 1.0)
    out = y.copy()
    for members, sigma, slow_mode in ((~noise.slow, noise.sigma, False), (noise.slow, noise.slow_sigma, True)):
        index = np.flatnonzero(members)
        if len(index) < 2 * HAMPEL_HALF_WIDTH + 1:
            continue
        values = y[index]
        low, high = running_median_bounds(values, HAMPEL_HALF_WIDTH)
        suspect = np.abs(values - np.clip(values, low, high)) > HAMPEL_K * sigma  # far from every median
        # the level is read again without the suspects: beside a slow episode a normal point
        # looks far from a 7-point median, and two episodes three commits apart would lift
        # each other's replacement into a bump
        low, high = running_median_bounds(np.where(suspect, np.nan, values), LEVEL_HALF_WIDTH)
        # a suspect is replaced by the middle of its neighbours; a kept point is clipped towards the median nearest it
        median = np.where(suspect, (low + high) / 2, np.clip(values, low, high))
        median = np.where(np.isnan(median), running_median(values, LEVEL_HALF_WIDTH), median)
        residual = values - median
        # at either end the 7-point window cannot tell an episode from a step (it holds a majority of it), the
        # 15-point one can: a change needs min_size points before it is seen anyway
        end = np.minimum(np.arange(len(values)), np.arange(len(values))[::-1]) < HAMPEL_HALF_WIDTH
        # ... but a mode's last points can all be new: a GPU series whose slow share rose has a few fast points
        # after a late step, and the 15-point level holds the old one. A run at an end longer than an episode is a
        # level of its own, its points clipped only towards the run's own medians
        run = runs_at_ends(_end_deviations(values, LEVEL_HALF_WIDTH), HAMPEL_K * sigma)
        if run.any():
            low, high = running_median_bounds(np.where(run, values, np.nan), HAMPEL_HALF_WIDTH)
            median = np.where(run, np.clip(values, low, high), median)
            residual = values - median
            end &= ~run
            suspect &= ~run
        far = (suspect | end) & (np.abs(residual) > HAMPEL_K * sigma)
        out[index] = np.where(far, median, median + np.clip(residual, -HUBER_K * sigma, HUBER_K * sigma))
        if slow_mode and far.any():
            # a slow point far from its own mode's level but on the fast mode's level of its commits is no outlier:
            # beside a step, a mode with few points on one side reads its level from the other (two slow runs
            # before a 20 % step at commit 11 were moved 18 % up onto the new level, and a warm-up took the step)
            level = _fast_level_at(index, out, ~noise.slow)
            kept = far & (np.abs(values - level) <= HAMPEL_K * sigma)
            out[index[kept]] = level[kept] + np.clip(values[kept] - level[kept], -HUBER_K * sigma, HUBER_K * sigma)
    return out, weight


def _fast_level_at(index: np.ndarray, cleaned: np.ndarray, fast: np.ndarray) -> np.ndarray:
    """The fast mode's level at commits ``index``: the running median of its cleaned points nearest each."""
    at = np.flatnonzero(fast)
    if len(at) == 0:
        return np.full(len(index), np.nan)
    level = running_median(cleaned[at], HAMPEL_HALF_WIDTH)
    nearest = np.clip(np.searchsorted(at, index), 0, len(at) - 1)
    before = np.maximum(nearest - 1, 0)
    nearest = np.where(np.abs(at[before] - index) < np.abs(at[nearest] - index), before, nearest)
    return level[nearest]
