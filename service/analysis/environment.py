"""An A/B side moved by the machine, not by the code: almost every benchmark by one factor.

A throttled GPU, a noisy neighbour or a clock change slows everything a process runs by about
the same factor, unchanged code included. Code changes move the benchmarks they touch. So when
nearly all benchmarks of an A/B moved the same way by nearly the same factor, the A/B is
measured again rather than believed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import median

MIN_BENCHMARKS = 3  # fewer cannot tell "everything moved" from "what this change touches moved"
SHARE = 0.8  # of all benchmarks compared, moved significantly in one direction
FACTOR_SPREAD = 0.25  # their log-ratios within this fraction of the common log-ratio


def common_shift(log_ratios: Sequence[float], significant: Sequence[bool]) -> float | None:
    """The common factor (head / base) when the A/B looks like an environment shift, else ``None``.

    ``log_ratios[i]`` is log(head / base) of benchmark ``i``; ``significant[i]`` whether the A/B
    found it beyond its threshold.
    """
    if len(log_ratios) < MIN_BENCHMARKS or len(log_ratios) != len(significant):
        return None
    moved = [r for r, s in zip(log_ratios, significant, strict=True) if s]
    for sign in (1.0, -1.0):
        same_way = [r for r in moved if r * sign > 0]
        if len(same_way) < SHARE * len(log_ratios):
            continue
        common = median(same_way)
        if all(abs(r - common) <= FACTOR_SPREAD * abs(common) for r in same_way):
            return math.exp(common)
    return None
