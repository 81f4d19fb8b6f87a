"""Two single runs from someone else's CI, one median each: is the head slower or faster?

Without samples there is no test of significance, so a change is called only when the ratio of
medians lies beyond ``max(min_effect, k × run_noise)``, the run-to-run spread of the series'
own history (``compare.run_to_run_noise``); while that history is too short, only beyond
``compare.UNKNOWN_RUN_NOISE_FLOOR``. With samples on both sides ``compare.compare`` decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from roofwatch.service.analysis import compare


def verdict(base: Sequence[float], head: Sequence[float], base_median: float, head_median: float, *,
            higher_is_better: bool = False, run_noise: float | None = None, min_effect: float = 0.05,
            noise_k: float = 3.0) -> compare.Verdict:
    """Base → head; percentages signed, + means slower (or lower, when higher is better)."""
    if len(base) >= compare.MIN_SAMPLES and len(head) >= compare.MIN_SAMPLES:
        return compare.compare(list(base), list(head), higher_is_better=higher_is_better, run_noise=run_noise,
                               min_effect=min_effect, noise_k=noise_k)
    if not (base_median > 0 and head_median > 0):
        raise ValueError(f"medians must be positive, got {base_median} and {head_median}")
    sign = -1.0 if higher_is_better else 1.0
    change = sign * (head_median / base_median - 1.0) * 100.0
    threshold = compare.run_noise_floor(run_noise, min_effect, noise_k) * 100.0
    if compare.within(head_median / base_median, threshold):
        return compare.Verdict(change, change, change, 1.0, threshold, "none",
                               f"{change:+.1f}% is within the ±{threshold:.1f}% run-to-run threshold (medians only)")
    direction: Literal["regression", "improvement"] = "regression" if change > 0 else "improvement"
    return compare.Verdict(change, change, change, 1.0, threshold, direction,
                           f"{change:+.1f}% beyond ±{threshold:.1f}% (medians of single runs, no interval)")
