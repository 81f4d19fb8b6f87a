"""Change points in one benchmark series: where did the level move, and by how much?

Benchmark histories are not the tidy gaussian steps most detectors assume. Timings have
heavy tails, a noisy neighbour slows a few runs in a row, an autotuner flips between two
configurations, and thermals or a slowly filling disk make the level drift. The detector
is built for that, in two stages:

1. **Candidates** — binary segmentation with a rank CUSUM: for every split of a segment,
   the standardised Mann–Whitney statistic of "left vs right". Ranks make it blind to how
   far an outlier lies and indifferent to a bimodal noise distribution. A segment whose
   largest statistic passes a Bonferroni bound over its splits is split there, and both
   halves are searched again.
2. **Confirmation** — each candidate is tested on the windows either side of it (bounded
   by its neighbours) with a regression of the winsorised log-values on a step at the
   candidate and, when the window drifts significantly, a linear trend. The step must be
   significant *and* larger than ``min_effect``: a drift cut into pieces has no step, and
   a spike is clipped by winsorising before it can look like one. Candidates are then
   re-confirmed against their final neighbours until the set is stable, as E-divisive
   implementations in Otava do after each removal.

Values are positive numbers (times, or throughputs): the detector works on their logarithm
so a change is relative and its size the same whichever way up the unit is. Non-finite and
non-positive entries are skipped; indexes always refer to the input rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

DEFAULT_ALPHA = 1e-4  # per confirmed change (chosen on the bench generator, seed 0; see docs/analysis.md)
DEFAULT_SEGMENT_ALPHA = 0.01  # per segment searched for a candidate
DEFAULT_MIN_EFFECT = 0.01  # relative change below which a step is not worth a change
DEFAULT_MIN_SIZE = 5  # points needed on each side of a change
DEFAULT_WINDOW = 30  # points either side used to confirm and size a change
WINSOR_K = 4.0  # clip residuals beyond this many robust standard deviations
HAMPEL_HALF_WIDTH = 3  # a running median over 7 points ignores slow episodes of up to 3 commits
TREND_Z = 3.0  # a trend enters the confirmation model only when this significant
MODE_SEPARATION = 6.0  # two autotuner modes: gap over within-mode spread
MODE_SHARE = 0.1  # the smaller mode holds at least this share of the window


@dataclass(frozen=True)
class ChangePoint:
    index: int  # input row of the first value after the change
    before: float  # level (median) just before, in the input's unit
    after: float  # level just after
    change_pct: float  # (after / before - 1) × 100
    p_value: float
    ci_low: float  # 95 % interval of change_pct
    ci_high: float


def robust_sigma(x: np.ndarray) -> float:
    """Noise scale that steps, drift and outliers barely move: MAD of first differences / √2."""
    if len(x) < 3:
        return 0.0
    d = np.diff(x)
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


def mode_aware_sigma(x: np.ndarray, sigma: float, half_width: int = HAMPEL_HALF_WIDTH) -> float:
    """Scale for winsorising that two autotuner modes do not shrink: the 90th percentile of residuals."""
    if len(x) < 2 * half_width + 1:
        return sigma
    return max(sigma, float(np.quantile(np.abs(x - _running_median(x, half_width)), 0.9)) / 1.645)


def _running_median(x: np.ndarray, half_width: int) -> np.ndarray:
    """Median of each point's ``2 * half_width + 1`` neighbourhood, the ends padded with their own value."""
    padded = np.pad(x, half_width, mode="edge")
    return np.median(np.lib.stride_tricks.sliding_window_view(padded, 2 * half_width + 1), axis=1)


def despike(x: np.ndarray, sigma: float, half_width: int = HAMPEL_HALF_WIDTH, k: float = WINSOR_K) -> np.ndarray:
    """Hampel filter: a point further than ``k`` σ from its running median is replaced by that median.

    A running median keeps steps sharp but forgets episodes shorter than its half width, so a
    noisy neighbour slowing three commits cannot pull a split towards itself.
    """
    if sigma <= 0 or len(x) < 2 * half_width + 1:
        return x
    median = _running_median(x, half_width)
    residual = x - median
    # The spread around the running median, not between neighbours: with two autotuner modes
    # both are "normal", and only points beyond the pair are treated as episodes.
    spread = max(sigma, 1.4826 * float(np.median(np.abs(residual))))
    return np.where(np.abs(residual) > k * spread, median, x)


def _rank_cusum(seg: np.ndarray, min_size: int) -> tuple[int, float]:
    """Best split of ``seg`` (offset of the first right-hand point) and its |z|."""
    n = len(seg)
    # Ordinal ranks: float timings practically never tie, and argsort is ~10x faster than rankdata.
    ranks = np.empty(n)
    ranks[np.argsort(seg, kind="stable")] = np.arange(1, n + 1)
    k = np.arange(min_size, n - min_size + 1)
    u = np.cumsum(ranks)[k - 1] - k * (k + 1) / 2.0
    mean = k * (n - k) / 2.0
    sd = np.sqrt(k * (n - k) * (n + 1) / 12.0)
    z = np.abs((u - mean) / sd)
    best = int(np.argmax(z))
    return int(k[best]), float(z[best])


def _candidates(x: np.ndarray, min_size: int, segment_alpha: float) -> list[int]:
    found: list[int] = []
    stack = [(0, len(x))]
    while stack:
        start, end = stack.pop()
        n = end - start
        if n < 2 * min_size:
            continue
        split, z = _rank_cusum(x[start:end], min_size)
        splits = n - 2 * min_size + 1
        if z < -special.ndtri(segment_alpha / (2 * splits)):
            continue
        found.append(start + split)
        stack += [(start, start + split), (start + split, end)]
    return sorted(found)


@dataclass(frozen=True)
class _Step:
    log_step: float
    se: float
    p_value: float


def _step_test(x: np.ndarray, k: int, lo: int, hi: int, sigma: float) -> _Step | None:
    """Step at ``k`` within ``x[lo:hi]``, adjusted for a linear trend when one is present."""
    left, right = x[lo:k], x[k:hi]
    if len(left) < 2 or len(right) < 2:
        return None
    y = np.concatenate([left, right])
    centre = np.concatenate([np.full(len(left), np.median(left)), np.full(len(right), np.median(right))])
    if sigma > 0:
        # Winsorise around each side's median so one wild point cannot make or hide a step.
        y = centre + np.clip(y - centre, -WINSOR_K * sigma, WINSOR_K * sigma)
    t = np.arange(lo, hi, dtype=float) - (k - 0.5)
    step = (np.arange(lo, hi) >= k).astype(float)
    ones = np.ones_like(t)
    upper = _upper_mode(y, step)
    extra = [upper] if upper is not None else []
    plain = _ols(np.column_stack([ones, step, *extra]), y)
    trended = _ols(np.column_stack([ones, step, t, *extra]), y)
    chosen = plain
    if trended is not None and abs(trended[2][2]) > TREND_Z:
        chosen = trended
    if chosen is None:
        return None
    coef, se, tstat, dof = chosen
    if not math.isfinite(tstat[1]):
        return None
    return _Step(float(coef[1]), float(se[1]), float(2 * special.stdtr(dof, -abs(tstat[1]))))


def _upper_mode(y: np.ndarray, step: np.ndarray, rounds: int = 3) -> np.ndarray | None:
    """Which points sit on the upper of two well-separated modes around a step, or None.

    An autotuner flipping between two configurations adds a bimodal term that hides a step
    smaller than the gap. When the residuals around the step split cleanly in two (the gap
    many times the spread within each mode), the mode becomes a covariate of the step test.
    """
    upper = None
    for _ in range(rounds):
        design = np.column_stack([np.ones_like(y), step] + ([upper] if upper is not None else []))
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        level = design[:, :2] @ coef[:2]
        r = y - level
        cut = _two_means_cut(r)
        if cut is None:
            return None
        found = (r > cut).astype(float)
        if upper is not None and np.array_equal(found, upper):
            break
        upper = found
    if upper is None or not MODE_SHARE <= upper.mean() <= 1 - MODE_SHARE:
        return None
    low, high = r[upper == 0], r[upper == 1]
    within = math.sqrt((np.sum((low - low.mean()) ** 2) + np.sum((high - high.mean()) ** 2)) / max(len(r) - 2, 1))
    if within <= 0 or (high.mean() - low.mean()) < MODE_SEPARATION * within:
        return None
    return upper


def _two_means_cut(r: np.ndarray) -> float | None:
    """Threshold of the best split of ``r`` into two groups (1-D 2-means, exact by sorting)."""
    v = np.sort(r)
    n = len(v)
    if n < 4:
        return None
    sums = np.cumsum(v)
    i = np.arange(1, n)
    left_mean, right_mean = sums[:-1] / i, (sums[-1] - sums[:-1]) / (n - i)
    between = i * (n - i) * (right_mean - left_mean) ** 2 / n
    best = int(np.argmax(between))
    return float((v[best] + v[best + 1]) / 2)


def _ols(design: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
    n, p = design.shape
    dof = n - p
    if dof < 1:
        return None
    gram = design.T @ design
    try:
        inverse = np.linalg.inv(gram)
    except np.linalg.LinAlgError:
        return None
    coef = inverse @ (design.T @ y)
    resid = y - design @ coef
    s2 = float(resid @ resid) / dof
    se = np.sqrt(np.maximum(np.diag(inverse) * s2, 1e-300))
    return coef, se, coef / se, dof


def _confirm(x: np.ndarray, cps: list[int], sigma: float, alpha: float, min_effect: float,
             window: int) -> list[tuple[int, _Step]]:
    """Keep the candidates that hold against their current neighbours; repeat until stable."""
    cps = sorted(set(cps))
    while True:
        kept: list[tuple[int, _Step]] = []
        dropped = False
        for i, k in enumerate(cps):
            lo = max(cps[i - 1] if i else 0, k - window)
            hi = min(cps[i + 1] if i + 1 < len(cps) else len(x), k + window)
            step = _step_test(x, k, lo, hi, sigma)
            if step is None or step.p_value >= alpha or abs(math.expm1(step.log_step)) < min_effect:
                dropped = True
                continue
            kept.append((k, step))
        if not dropped:
            return kept
        # Re-test the survivors: removing a neighbour widens their windows.
        cps = [k for k, _ in kept]


def _refine(x: np.ndarray, k: int, lo: int, hi: int, min_size: int, sigma: float, reach: int = 3) -> int:
    """Move ``k`` to the nearby split whose step stands out most: segmentation can be a point or two off.

    Two autotuner modes make a plain two-sample t wander, so where the window has them the
    split is chosen by the confirmation's own mode-aware step test instead.
    """
    window = x[lo:hi]
    if _upper_mode(window, (np.arange(lo, hi) >= k).astype(float)) is None:
        return _refine_by_t(x, k, lo, hi, min_size, reach)
    best, best_t = k, -1.0
    for j in range(max(lo + min_size, k - reach), min(hi - min_size, k + reach) + 1):
        step = _step_test(x, j, lo, hi, sigma)
        if step is not None and step.se > 0 and abs(step.log_step) / step.se > best_t:
            best, best_t = j, abs(step.log_step) / step.se
    return best


def _refine_by_t(x: np.ndarray, k: int, lo: int, hi: int, min_size: int, reach: int = 3) -> int:
    """Move ``k`` to the nearby split with the largest two-sample t: segmentation can be a point or two off."""
    first, last = max(lo + min_size, k - reach), min(hi - min_size, k + reach)
    if first >= last:
        return k
    seg = x[lo:hi]
    n = len(seg)
    sums, squares = np.cumsum(seg), np.cumsum(seg * seg)
    splits = np.arange(first, last + 1) - lo
    left_n, right_n = splits.astype(float), n - splits.astype(float)
    left_sum, right_sum = sums[splits - 1], sums[-1] - sums[splits - 1]
    left_sq, right_sq = squares[splits - 1], squares[-1] - squares[splits - 1]
    diff = right_sum / right_n - left_sum / left_n
    within = (left_sq - left_sum**2 / left_n) + (right_sq - right_sum**2 / right_n)
    pooled = np.maximum(within / np.maximum(n - 2, 1), 1e-300)
    t = np.abs(diff) / np.sqrt(pooled * (1 / left_n + 1 / right_n))
    return int(splits[int(np.argmax(t))] + lo)


def detect(values: Sequence[float] | np.ndarray, *, alpha: float = DEFAULT_ALPHA,
           segment_alpha: float = DEFAULT_SEGMENT_ALPHA, min_effect: float = DEFAULT_MIN_EFFECT,
           min_size: int = DEFAULT_MIN_SIZE, window: int = DEFAULT_WINDOW) -> list[ChangePoint]:
    """Change points of one series, oldest value first."""
    raw = np.asarray(values, dtype=float)
    rows = np.flatnonzero(np.isfinite(raw) & (raw > 0))
    if len(rows) < 2 * min_size:
        return []
    x = np.log(raw[rows])
    sigma = robust_sigma(x)
    # Search on the despiked series; confirm on the measured one (winsorised there instead).
    wsigma = mode_aware_sigma(x, sigma)
    candidates = _candidates(despike(x, wsigma), min_size, segment_alpha)
    confirmed = _confirm(x, candidates, wsigma, alpha, min_effect, window)
    positions = [k for k, _ in confirmed]
    refined: list[int] = []
    for i, k in enumerate(positions):
        lo = max(positions[i - 1] if i else 0, k - window)
        hi = min(positions[i + 1] if i + 1 < len(positions) else len(x), k + window)
        refined.append(_refine(x, k, lo, hi, min_size, wsigma))
    confirmed = _confirm(x, refined, wsigma, alpha, min_effect, window)
    return [_describe(raw, rows, x, confirmed, i, window) for i in range(len(confirmed))]


def _describe(raw: np.ndarray, rows: np.ndarray, x: np.ndarray, confirmed: list[tuple[int, _Step]],
              i: int, window: int) -> ChangePoint:
    k, step = confirmed[i]
    lo = max(confirmed[i - 1][0] if i else 0, k - window)
    hi = min(confirmed[i + 1][0] if i + 1 < len(confirmed) else len(x), k + window)
    before = float(np.exp(np.median(x[lo:k])))
    after = float(np.exp(np.median(x[k:hi])))
    half = 1.96 * step.se
    return ChangePoint(
        index=int(rows[k]), before=before, after=after,
        change_pct=math.expm1(step.log_step) * 100.0, p_value=step.p_value,
        ci_low=math.expm1(step.log_step - half) * 100.0, ci_high=math.expm1(step.log_step + half) * 100.0,
    )
