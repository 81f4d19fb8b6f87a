"""Interleaved A/B verdicts: base and head measured in alternating fresh processes.

Each round runs the base, then the head, each in a new process, and keeps one number per
benchmark and side: the median of that process's samples. Rounds, not samples, are the
unit of evidence, because most of the noise that fools a benchmark lives *between*
processes (clocks, memory placement, caches, a neighbour on the host) and samples from one
process cannot see it. Pairing round i's base with round i's head cancels slow drift of the
machine, so the statistic is the paired log-ratio ``d_i = log(head_i / base_i)``.

A change is reported only when

* the paired t-test on ``d`` is significant at ``alpha`` after false-discovery control
  across every benchmark of the comparison (Benjamini–Hochberg), **and**
* the estimated change is larger than ``max(min_effect, k × noise)``, where noise is the
  per-process spread measured in this very comparison (``std(d) / √2``).

The t interval on the mean of ``d`` gives the confidence interval. A comparison whose
interval still reaches beyond the threshold without being significant is *inconclusive*:
the caller adds rounds (up to a cap) before any verdict is posted. Every verdict carries
the smallest change the run could have detected (80 % power at ``alpha``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

from roofwatch.service.analysis import fdr

MIN_ROUNDS = 3
DEFAULT_ALPHA = 0.001  # per comparison after FDR; sequential looks (3..cap rounds) inflate it a little
DEFAULT_MIN_EFFECT = 0.02
DEFAULT_NOISE_K = 3.0
POWER = 0.8

Direction = Literal["regression", "improvement", "none", "inconclusive"]


@dataclass(frozen=True)
class ABVerdict:
    """Base → head verdict of one benchmark. Percentages are signed: + means slower/worse."""

    change_pct: float
    ci_low: float
    ci_high: float
    p_value: float  # raw paired t-test
    q_value: float  # after false-discovery control across the comparison
    noise_pct: float  # per-process spread measured in this comparison
    threshold_pct: float  # max(min_effect, k × noise): the smallest change that is reported
    mde_pct: float  # smallest change this run could have detected (80 % power)
    rounds: int
    direction: Direction
    reason: str


def _pct(log_ratio: float) -> float:
    return math.expm1(log_ratio) * 100.0


def _log_ratios(base: Sequence[float], head: Sequence[float], higher_is_better: bool) -> np.ndarray:
    pairs = [(b, h) for b, h in zip(base, head) if b > 0 and h > 0 and math.isfinite(b) and math.isfinite(h)]
    if not pairs:
        return np.zeros(0)
    b, h = np.asarray(pairs, dtype=float).T
    ratios = np.log(h / b)
    # Throughput-style units: a drop is the slowdown, so flip the sign to keep "+ = worse".
    return -ratios if higher_is_better else ratios


def _single(base: Sequence[float], head: Sequence[float], higher_is_better: bool,
            min_effect: float, noise_k: float, alpha: float) -> tuple[dict[str, float], str | None]:
    d = _log_ratios(base, head, higher_is_better)
    n = len(d)
    if n < MIN_ROUNDS:
        return {"rounds": n}, f"only {n} paired round(s); need {MIN_ROUNDS}"
    mean = float(np.mean(d))
    sd = float(np.std(d, ddof=1))
    se = sd / math.sqrt(n)
    dof = n - 1
    if se == 0.0:
        # Identical numbers every round (a quantised timer, a cached result): no spread to test.
        p_value = 1.0 if mean == 0.0 else 0.0
        half = 0.0
    else:
        p_value = float(2 * stats.t.sf(abs(mean) / se, dof))
        half = float(stats.t.ppf(0.975, dof)) * se
    noise = sd / math.sqrt(2)  # one process's spread: a difference of two carries two of them
    threshold = max(min_effect, math.expm1(noise_k * noise))
    detectable = (float(stats.t.ppf(1 - alpha / 2, dof)) + float(stats.t.ppf(POWER, dof))) * se
    return {
        "rounds": n, "mean": mean, "p_value": p_value,
        "ci_low": _pct(mean - half), "ci_high": _pct(mean + half),
        "noise_pct": math.expm1(noise) * 100.0, "threshold_pct": threshold * 100.0,
        "mde_pct": max(threshold, math.expm1(detectable)) * 100.0,
    }, None


def verdicts(pairs: Sequence[tuple[Sequence[float], Sequence[float], bool]], *,
             alpha: float = DEFAULT_ALPHA, min_effect: float = DEFAULT_MIN_EFFECT,
             noise_k: float = DEFAULT_NOISE_K) -> list[ABVerdict]:
    """One verdict per ``(base_rounds, head_rounds, higher_is_better)``, FDR-controlled together."""
    singles = [_single(b, h, hib, min_effect, noise_k, alpha) for b, h, hib in pairs]
    testable = [i for i, (_, err) in enumerate(singles) if err is None]
    q_values = dict(zip(testable, fdr.adjust([singles[i][0]["p_value"] for i in testable])))
    out: list[ABVerdict] = []
    for i, (s, err) in enumerate(singles):
        if err is not None:
            out.append(ABVerdict(0.0, 0.0, 0.0, 1.0, 1.0, 0.0, math.inf, math.inf, int(s["rounds"]),
                                 "inconclusive", err))
            continue
        change, q, threshold = _pct(s["mean"]), q_values[i], s["threshold_pct"]
        low, high = s["ci_low"], s["ci_high"]
        direction: Direction
        # Sizes are compared as ratios: a 5x speedup (-80 %) is as large as a 5x slowdown (+400 %).
        beyond = abs(s["mean"]) > math.log1p(threshold / 100.0)
        within = max(abs(math.log1p(low / 100.0)), abs(math.log1p(high / 100.0))) <= math.log1p(threshold / 100.0)
        if q < alpha and beyond:
            direction = "regression" if change > 0 else "improvement"
            reason = f"{change:+.2f}% [{low:+.2f}, {high:+.2f}] (q={q:.2g}), beyond ±{threshold:.2f}%"
        elif q < alpha:
            direction = "none"
            reason = f"{change:+.2f}% is significant but within the ±{threshold:.2f}% threshold"
        elif within:
            direction = "none"
            reason = f"no change beyond ±{threshold:.2f}% (interval [{low:+.2f}, {high:+.2f}])"
        else:
            direction = "inconclusive"
            reason = (f"not significant (q={q:.2g}) but the interval [{low:+.2f}, {high:+.2f}] "
                      f"reaches beyond ±{threshold:.2f}%")
        out.append(ABVerdict(change, low, high, s["p_value"], q, s["noise_pct"], threshold,
                             s["mde_pct"], int(s["rounds"]), direction, reason))
    return out


def overall(verdict_list: Sequence[ABVerdict]) -> Literal["regression", "improvement", "no-change", "inconclusive"]:
    """One word for a whole comparison: any regression wins, then inconclusive, then improvement."""
    directions = {v.direction for v in verdict_list}
    if "regression" in directions:
        return "regression"
    if "inconclusive" in directions:
        return "inconclusive"
    if "improvement" in directions:
        return "improvement"
    return "no-change"


def needs_more_rounds(verdict_list: Sequence[ABVerdict]) -> bool:
    return any(v.direction == "inconclusive" for v in verdict_list)
