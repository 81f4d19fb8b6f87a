"""Is the head slower or faster than the base? Significance **and** effect size.

A change is reported only when the Mann-Whitney U test rejects "same distribution" at
``alpha`` (after the caller's false-discovery control) **and** the median moved by more
than ``max(min_effect, k × noise)``, where noise is the larger robust coefficient of
variation of the two sample sets (IQR / 1.349 / median). This is asv's rule of thumb
(significance plus a relative threshold) with the threshold scaled by the measured noise
so noisy benchmarks do not cry wolf.

Samples taken in one process cannot see the spread *between* processes (clocks, caches,
memory placement, the Triton interpreter's own overheads), which on a CPU host reaches tens
of percent for identical code. So when base and head come from separate runs the threshold
also covers ``k × run_noise``, the run-to-run spread measured on the series' own history
(``run_to_run_noise``); while that history is too short to know it, only changes beyond
``UNKNOWN_RUN_NOISE_FLOOR`` are reported.

The interval is a percentile bootstrap of the ratio of medians (Efron & Tibshirani 1993,
ch. 13) at ``1 − alpha``, the level the test decides at, seeded so a verdict is reproducible.

Cost is bounded whatever the round count: each side is first cut to a seeded reservoir of
``sampling.SAMPLE_LIMIT`` samples, and a bootstrap median is drawn without building its resample.
A resample's median is the order statistic where the cumulative count of draws among the j
smallest values crosses n/2; those counts form a binomial bridge, so the crossing is found by
bisection, one conditional binomial draw per halving: O(resamples × log n) instead of
O(resamples × n), and exactly the distribution ``np.median(rng.choice(x, n))`` has.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

from roofwatch.ab.abtest import DEFAULT_ALPHA
from roofwatch.common.sampling import reservoir
from roofwatch.service.analysis.noise import robust_sigma

MIN_SAMPLES = 3
MIN_HISTORY = 4  # earlier runs needed before the run-to-run spread is trusted
UNKNOWN_RUN_NOISE_FLOOR = 0.5  # relative change; a 2x slowdown or a 3x speedup still shows
BOOTSTRAP_RESAMPLES = 2000


@dataclass(frozen=True)
class Verdict:
    """Base → head comparison of one benchmark. Percentages are signed: + means slower."""

    change_pct: float
    ci_low: float
    ci_high: float
    p_value: float
    threshold_pct: float  # the smallest change this comparison could report
    direction: Literal["regression", "improvement", "none", "inconclusive"]  # inconclusive: single_runs only
    reason: str


def within(ratio: float, threshold_pct: float) -> bool:
    """Is head / base = ``ratio`` (of the metric itself) within ±``threshold_pct`` as a ratio? A 5x speedup is as
    large as a 5x slowdown, and a throughput that fell by 1/1.05 as large as a time that rose by 5 %: the signed
    percentage of a higher-is-better metric is no such ratio (a throughput that doubled is "−100 %")."""
    return ratio > 0 and abs(math.log(ratio)) <= math.log1p(threshold_pct / 100.0)


def robust_cv(samples: np.ndarray) -> float:
    median = float(np.median(samples))
    if median <= 0 or len(samples) < 2:
        return 0.0
    q75, q25 = np.percentile(samples, [75, 25])
    return float((q75 - q25) / 1.349 / median)


def run_to_run_noise(medians: list[float]) -> float | None:
    """Robust spread of the log-ratio between consecutive run medians, as a relative size.

    1.4826 × MAD estimates a standard deviation without being moved by the few real
    changes the history may hold; ``None`` while fewer than ``MIN_HISTORY`` runs exist.
    """
    values = np.asarray([m for m in medians if m > 0], dtype=float)
    if len(values) < MIN_HISTORY:
        return None
    # the MAD of consecutive differences, over √2: a difference of two runs carries the noise of both
    return float(np.expm1(robust_sigma(np.log(values))))


def run_noise_floor(run_noise: float | None, min_effect: float = 0.05, noise_k: float = 3.0) -> float:
    """The smallest relative move of a median between separate runs that counts: ``noise_k`` × the run-to-run
    spread (``run_to_run_noise``), ``UNKNOWN_RUN_NOISE_FLOOR`` while that is unknown, and never under
    ``min_effect``."""
    return max(min_effect, UNKNOWN_RUN_NOISE_FLOOR if run_noise is None else noise_k * run_noise)


def compare(base: list[float], head: list[float], *, higher_is_better: bool = False,
            alpha: float = DEFAULT_ALPHA, min_effect: float = 0.05, noise_k: float = 3.0,
            same_process: bool = False, run_noise: float | None = None,
            seed: int = 0) -> Verdict:
    """Compare two sets of samples (times in seconds unless ``higher_is_better``).

    ``same_process``: base and head were interleaved in one job, so their samples share
    every environmental effect. Otherwise ``run_noise`` (see ``run_to_run_noise``) widens
    the threshold, and its absence means the conservative floor.
    """
    a = np.asarray(reservoir(base, seed=seed), dtype=float)
    b = np.asarray(reservoir(head, seed=seed + 1), dtype=float)
    if len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
        return Verdict(0.0, 0.0, 0.0, 1.0, float("inf"), "none",
                       f"too few samples to test (base {len(a)}, head {len(b)}; need {MIN_SAMPLES})")
    med_a, med_b = float(np.median(a)), float(np.median(b))
    sign = -1.0 if higher_is_better else 1.0
    change = sign * (med_b / med_a - 1.0) * 100.0
    p_value = float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)

    rng = np.random.default_rng(seed)
    ratios = bootstrap_medians(b, BOOTSTRAP_RESAMPLES, rng) / bootstrap_medians(a, BOOTSTRAP_RESAMPLES, rng)
    # At the level the p-value decides at, so the interval shown is the one the verdict used.
    low, high = np.percentile(sign * (ratios - 1.0) * 100.0, [50 * alpha, 100 - 50 * alpha])
    floor = min_effect if same_process else run_noise_floor(run_noise, min_effect, noise_k)
    threshold = max(floor, noise_k * max(robust_cv(a), robust_cv(b))) * 100.0

    direction: Literal["regression", "improvement", "none"]
    if p_value >= alpha:
        direction, reason = "none", f"not significant (p={p_value:.3g} ≥ {alpha})"
    elif within(med_b / med_a, threshold):
        direction, reason = "none", f"{change:+.1f}% is within the ±{threshold:.1f}% noise threshold"
    else:
        direction = "regression" if change > 0 else "improvement"
        reason = f"{change:+.1f}% (p={p_value:.3g}), beyond ±{threshold:.1f}%"
    return Verdict(change, float(min(low, high)), float(max(low, high)), p_value, threshold,
                   direction, reason)


def bootstrap_medians(samples: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The medians of ``resamples`` bootstrap resamples of ``samples``, without building them.

    With the values sorted, let C(j) be how many of a resample's n draws fall among the j
    smallest (C(0) = 0, C(n) = n). Given C at two ranks, the count between them is binomial,
    so the first rank where C reaches t is found by bisection. The median is the value at the
    rank where C reaches (n + 1) / 2 (odd n), or the mean of the values where it reaches n/2
    and n/2 + 1 (even n); both come from one path: where a probe lands exactly on n/2 the path
    splits into two independent searches (the bridge is Markov).
    """
    ordered = np.sort(samples)
    n = len(ordered)
    if n % 2:
        return ordered[_first_rank(np.zeros(resamples, int), np.full(resamples, n), np.zeros(resamples, int),
                                   np.full(resamples, n), (n + 1) // 2, rng) - 1]
    k = n // 2
    lo, hi = np.zeros(resamples, int), np.full(resamples, n)
    c_lo, c_hi = np.zeros(resamples, int), np.full(resamples, n)
    # Per resample: the interval (lo, hi] holds both crossings (C(lo) < k, C(hi) >= k + 1) until
    # a probe lands on C = k, which separates them.
    split = np.zeros(resamples, bool)
    low_bounds = [lo.copy(), hi.copy(), c_lo.copy(), c_hi.copy()]
    high_bounds = [lo.copy(), hi.copy(), c_lo.copy(), c_hi.copy()]
    while True:
        active = ~split & (hi - lo > 1)
        if not active.any():
            break
        mid = (lo + hi) // 2
        c_mid = c_lo + rng.binomial(c_hi - c_lo, np.where(active, (mid - lo) / np.maximum(hi - lo, 1), 0.0))
        lands = active & (c_mid == k)
        for bounds, values in ((low_bounds, (lo, mid, c_lo, c_mid)), (high_bounds, (mid, hi, c_mid, c_hi))):
            for bound, value in zip(bounds, values, strict=True):
                bound[lands] = value[lands]
        split |= lands
        above = active & ~lands & (c_mid > k)
        below = active & ~lands & (c_mid < k)
        hi, c_hi = np.where(above, mid, hi), np.where(above, c_mid, c_hi)
        lo, c_lo = np.where(below, mid, lo), np.where(below, c_mid, c_lo)
    together = ~split  # both crossings at hi: (hi - 1, hi] with C(hi - 1) < k, C(hi) >= k + 1
    for bounds in (low_bounds, high_bounds):
        bounds[0][together], bounds[1][together] = hi[together] - 1, hi[together]
        bounds[2][together], bounds[3][together] = c_lo[together], c_hi[together]
    lower = _first_rank(low_bounds[0], low_bounds[1], low_bounds[2], low_bounds[3], k, rng)
    upper = _first_rank(high_bounds[0], high_bounds[1], high_bounds[2], high_bounds[3], k + 1, rng)
    return (ordered[lower - 1] + ordered[upper - 1]) / 2.0


def _first_rank(lo: np.ndarray, hi: np.ndarray, c_lo: np.ndarray, c_hi: np.ndarray, target: int,
                rng: np.random.Generator) -> np.ndarray:
    """The first rank in (lo, hi] where C reaches ``target``, given C(lo) < target <= C(hi)."""
    lo, hi, c_lo, c_hi = lo.copy(), hi.copy(), c_lo.copy(), c_hi.copy()
    while (hi - lo > 1).any():
        mid = (lo + hi) // 2
        c_mid = c_lo + rng.binomial(c_hi - c_lo, (mid - lo) / np.maximum(hi - lo, 1))
        reached = c_mid >= target
        hi, c_hi = np.where(reached, mid, hi), np.where(reached, c_mid, c_hi)
        lo, c_lo = np.where(reached, lo, mid), np.where(reached, c_lo, c_mid)
    return hi
