"""Is the head slower or faster than the base? Significance **and** effect size.

A change is reported only when the Mann-Whitney U test rejects "same distribution" at
``alpha`` (after the caller's false-discovery control) **and** the median moved by more
than ``max(min_effect, k × noise)``, where noise is the larger robust coefficient of
variation of the two sample sets (IQR / 1.349 / median). This is asv's rule of thumb
(significance plus a relative threshold) with the threshold scaled by the measured noise
so noisy benchmarks do not cry wolf.

The interval is a percentile bootstrap of the ratio of medians (Efron & Tibshirani 1993,
ch. 13), seeded so a verdict is reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

MIN_SAMPLES = 3
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


def compare(base: list[float], head: list[float], *, higher_is_better: bool = False,
            alpha: float = 0.01, min_effect: float = 0.05, noise_k: float = 3.0,
            seed: int = 0) -> Verdict:
    """Compare two sets of samples (times in seconds unless ``higher_is_better``)."""
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
    threshold = max(min_effect, noise_k * max(robust_cv(a), robust_cv(b))) * 100.0

    direction: Literal["regression", "improvement", "none"]
    if p_value >= alpha:
        direction, reason = "none", f"not significant (p={p_value:.3g} ≥ {alpha})"
    elif abs(change) <= threshold:
        direction, reason = "none", f"{change:+.1f}% is within the ±{threshold:.1f}% noise threshold"
    else:
        direction = "regression" if change > 0 else "improvement"
        reason = f"{change:+.1f}% (p={p_value:.3g}), beyond ±{threshold:.1f}%"
    return Verdict(change, float(min(low, high)), float(max(low, high)), p_value, threshold,
                   direction, reason)
