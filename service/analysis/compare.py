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
ch. 13), seeded so a verdict is reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

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
    direction: Literal["regression", "improvement", "none"]
    reason: str


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
    steps = np.diff(np.log(values))
    mad = float(np.median(np.abs(steps - np.median(steps))))
    # A difference of two runs carries the noise of both: divide by sqrt(2) for one run's.
    return float(np.expm1(1.4826 * mad / np.sqrt(2)))


def compare(base: list[float], head: list[float], *, higher_is_better: bool = False,
            alpha: float = 0.01, min_effect: float = 0.05, noise_k: float = 3.0,
            same_process: bool = False, run_noise: float | None = None,
            seed: int = 0) -> Verdict:
    """Compare two sets of samples (times in seconds unless ``higher_is_better``).

    ``same_process``: base and head were interleaved in one job, so their samples share
    every environmental effect. Otherwise ``run_noise`` (see ``run_to_run_noise``) widens
    the threshold, and its absence means the conservative floor.
    """
    a, b = np.asarray(base, dtype=float), np.asarray(head, dtype=float)
    if len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
        return Verdict(0.0, 0.0, 0.0, 1.0, float("inf"), "none",
                       f"too few samples to test (base {len(a)}, head {len(b)}; need {MIN_SAMPLES})")
    med_a, med_b = float(np.median(a)), float(np.median(b))
    sign = -1.0 if higher_is_better else 1.0
    change = sign * (med_b / med_a - 1.0) * 100.0
    p_value = float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)

    rng = np.random.default_rng(seed)
    ratios = (
        np.median(rng.choice(b, (BOOTSTRAP_RESAMPLES, len(b))), axis=1)
        / np.median(rng.choice(a, (BOOTSTRAP_RESAMPLES, len(a))), axis=1)
    )
    low, high = np.percentile(sign * (ratios - 1.0) * 100.0, [2.5, 97.5])
    floor = min_effect
    if not same_process:
        floor = max(floor, UNKNOWN_RUN_NOISE_FLOOR if run_noise is None else noise_k * run_noise)
    threshold = max(floor, noise_k * max(robust_cv(a), robust_cv(b))) * 100.0

    direction: Literal["regression", "improvement", "none"]
    if p_value >= alpha:
        direction, reason = "none", f"not significant (p={p_value:.3g} ≥ {alpha})"
    elif abs(np.log1p(change / 100.0)) <= np.log1p(threshold / 100.0):
        # Compared as ratios: a 5x speedup (-80 %) is as large as a 5x slowdown (+400 %).
        direction, reason = "none", f"{change:+.1f}% is within the ±{threshold:.1f}% noise threshold"
    else:
        direction = "regression" if change > 0 else "improvement"
        reason = f"{change:+.1f}% (p={p_value:.3g}), beyond ±{threshold:.1f}%"
    return Verdict(change, float(min(low, high)), float(max(low, high)), p_value, threshold,
                   direction, reason)
