"""Two single runs from someone else's CI, one median each: is the head slower or faster?

Without samples there is no test of significance, so a change is called only when the ratio of
medians lies beyond ``max(min_effect, k × run_noise)``, the run-to-run spread of the series'
own history (``compare.run_to_run_noise``); while that history is too short, only beyond
``compare.UNKNOWN_RUN_NOISE_FLOOR``. With samples on both sides ``compare.compare`` decides.

"No change" is said as an A/B says it, only inside ``±min_effect``: of the medians when there are
no samples, of the whole bootstrap interval when there are. A move beyond ``min_effect`` that the
noise threshold still covers is *inconclusive*, never "none": two single runs cannot tell it
from a change, and a check must not turn green on it. Else the head's own samples would set its
bar — a run whose samples spread wide widens the threshold (3 × their robust CV), and a 2x
slowdown with a few runs slower still passed as "within the noise".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from roofwatch.service.analysis import compare


def verdict(base: Sequence[float], head: Sequence[float], base_median: float, head_median: float, *,
            higher_is_better: bool = False, run_noise: float | None = None, min_effect: float = 0.05,
            noise_k: float = 3.0) -> compare.Verdict:
    """Base → head; percentages signed, + means slower (or lower, when higher is better)."""
    if len(base) >= compare.MIN_SAMPLES and len(head) >= compare.MIN_SAMPLES:
        found = compare.compare(list(base), list(head), higher_is_better=higher_is_better, run_noise=run_noise,
                                min_effect=min_effect, noise_k=noise_k)
        return _settled(found, higher_is_better, min_effect)
    if not (base_median > 0 and head_median > 0):
        raise ValueError(f"medians must be positive, got {base_median} and {head_median}")
    sign = -1.0 if higher_is_better else 1.0
    change = sign * (head_median / base_median - 1.0) * 100.0
    threshold = compare.run_noise_floor(run_noise, min_effect, noise_k) * 100.0
    if compare.within(head_median / base_median, threshold):
        if compare.within(head_median / base_median, min_effect * 100.0):
            return compare.Verdict(change, change, change, 1.0, threshold, "none",
                                   f"{change:+.1f}% is within the ±{min_effect:.0%} that counts (medians only)")
        return compare.Verdict(change, change, change, 1.0, threshold, "inconclusive",
                               f"{change:+.1f}% is beyond the ±{min_effect:.0%} that counts but within the "
                               f"±{threshold:.1f}% run-to-run threshold (medians only): {_UNDECIDED}")
    direction: Literal["regression", "improvement"] = "regression" if change > 0 else "improvement"
    return compare.Verdict(change, change, change, 1.0, threshold, direction,
                           f"{change:+.1f}% beyond ±{threshold:.1f}% (medians of single runs, no interval)")


_UNDECIDED = "two single runs cannot tell it from a change; an A/B of interleaved rounds can"


def _ratio(pct: float, higher_is_better: bool) -> float:
    """The metric's own head / base ratio of a signed percentage (+ is worse)."""
    return 1.0 - pct / 100.0 if higher_is_better else 1.0 + pct / 100.0


def _settled(found: compare.Verdict, higher_is_better: bool, min_effect: float) -> compare.Verdict:
    """``found`` as this module says it: a "none" whose interval reaches beyond ``±min_effect`` is inconclusive."""
    if found.direction != "none":
        return found
    if all(compare.within(_ratio(end, higher_is_better), min_effect * 100.0) for end in (found.ci_low, found.ci_high)):
        return found
    return replace(found, direction="inconclusive",
                   reason=f"{found.reason}, and its interval [{found.ci_low:+.1f}, {found.ci_high:+.1f}] reaches "
                          f"beyond the ±{min_effect:.0%} that counts: {_UNDECIDED}")
