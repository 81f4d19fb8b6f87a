"""Interleaved A/B verdicts: base and head measured in alternating fresh processes.

Each round runs the base, then the head (or the other way round), each in a new process, and
keeps one number per benchmark and side: the process's own statistic of its samples
(``process_value``). Rounds, not samples, are the unit of evidence, because most of the noise
that fools a benchmark lives *between* processes (clocks, memory placement, caches, a
neighbour on the host) and samples from one process cannot see it. Pairing round i's base with
round i's head cancels slow drift of the machine, so the statistic is the paired log-ratio
``d_i = log(head_i / base_i)`` (sign flipped for higher-is-better units: + is always worse).

**What counts is the team's; what settles it is the data's.** ``min_effect`` (default 2 %) is
the smallest change that matters. Measured noise never moves it; noise only decides how many
rounds a verdict needs:

* *regression*: the change is significant — the interval excludes zero — **and** the estimate
  is above ``+min_effect`` (an interval entirely above ``+min_effect`` is always one);
* *improvement*: the mirror image;
* *none*: the interval lies within ``±min_effect``: whatever changed, it does not matter;
* *inconclusive*: anything else — the run cannot yet tell, and says how many rounds would.

The interval is Student's t on the mean of ``d`` (log-normal timing noise makes ``d`` close
to normal; heavy tails and bimodal rounds widen ``s`` and so the interval: they cost rounds,
not false alarms, which ``bench.verdicts`` measures on A/A simulations instead of assuming).
Two guards keep a few rounds from deciding alone: a change must still be significant with its
most extreme round left out (one wild process never names a regression), and ``noise_floor``
— a series' known between-process noise, e.g. from its history — keeps three coincidentally
equal rounds of a bimodal benchmark from looking noiseless.

Many benchmarks are decided together, so a change is claimed with Benjamini–Hochberg
selection at ``alpha`` and shown with the false-coverage-rate adjusted interval of the
selected (Benjamini & Yekutieli 2005, level ``1 − alpha·R/m`` for R changes among m
benchmarks); *none* and *inconclusive* are judged on the marginal ``1 − alpha`` interval. Each
verdict carries the confidence of the interval it shows and decided with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
from scipy import stats

from roofwatch.ab import fdr

MIN_ROUNDS = 3
# The one constant that sets the confidence of every A/B interval: decided with and shown at
# ``CONFIDENCE`` (99 %), a change's at the false-coverage-rate adjusted ``change_confidence`` (higher).
# Every label that names a level reads it from here (``units.level_text(abtest.CONFIDENCE)``).
DEFAULT_ALPHA = 0.01
CONFIDENCE = 1 - DEFAULT_ALPHA
DEFAULT_MIN_EFFECT = 0.02
POWER = 0.8
ROUNDS_CAP = 1000  # beyond this many rounds a benchmark "cannot be judged" at its min_effect
# Timers whose per-process samples are a fast mode plus interference (DESIGN §5): their
# process value is the fast mode's location, a low quantile, which the slow mode's share
# does not move (see docs/analysis.md, "The GPU statistic").
FAST_MODE_TIMERS = frozenset({"cuda_event", "cuda_graph"})
FAST_MODE_QUANTILE = 10.0

# "interaction": a regression or improvement by the numbers of a benchmark whose code is identical on
# both sides (``analysis.causes``); it decides nothing.
Direction = Literal["regression", "improvement", "none", "inconclusive", "interaction"]
Overall = Literal["regression", "improvement", "no-change", "inconclusive"]


@dataclass(frozen=True)
class PairedRounds:
    """One benchmark's per-process values, paired by round; seconds unless ``higher_is_better``."""

    base: Sequence[float]
    head: Sequence[float]
    higher_is_better: bool = False
    min_effect: float | None = None  # the benchmark's own, else the comparison's
    noise_floor: float = 0.0  # known relative between-process noise of one process
    head_first: Sequence[bool] | None = None  # per round: did the head's process run first?


@dataclass(frozen=True)
class ABVerdict:
    """Base → head verdict of one benchmark. Percentages are signed: + means slower/worse."""

    change_pct: float
    ci_low: float
    ci_high: float
    p_value: float  # raw paired t-test
    q_value: float  # Benjamini–Hochberg across the comparison
    noise_pct: float  # one process's between-process spread, measured here (or the floor)
    threshold_pct: float  # min_effect: the smallest change that counts
    mde_pct: float  # smallest change this many rounds detect with 80 % power
    rounds: int
    direction: Direction
    reason: str
    confidence: float = CONFIDENCE  # of the interval shown, which the decision used
    rounds_needed: int | None = None  # rounds that would settle an inconclusive one; None: cannot


def process_value(samples: Sequence[float], median: float, timer: str = "") -> float:
    """The one number a process contributes to a round: see ``FAST_MODE_TIMERS``; else the median."""
    if timer in FAST_MODE_TIMERS and len(samples) >= 2:
        return float(np.percentile(np.asarray(samples, dtype=float), FAST_MODE_QUANTILE))
    return median


@lru_cache(maxsize=4096)
def _t(q: float, dof: int) -> float:
    """Student t quantile; cached, since a comparison asks for the same few again and again."""
    return float(stats.t.ppf(q, dof))


@lru_cache(maxsize=16)
def _halfwidth_factors(alpha: float) -> np.ndarray:
    """``t(1 − alpha/2, n − 1) / √n`` for n = 0 … ROUNDS_CAP (the first entries unused)."""
    ns = np.arange(ROUNDS_CAP + 1, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        factors = stats.t.ppf(1 - alpha / 2, ns - 1) / np.sqrt(ns)
    factors[:MIN_ROUNDS] = np.inf
    return factors


def _pct(log_ratio: float) -> float:
    return math.expm1(log_ratio) * 100.0


def _valid(b: float, h: float) -> bool:
    return b > 0 and h > 0 and math.isfinite(b) and math.isfinite(h)


def log_ratios(base: Sequence[float], head: Sequence[float], higher_is_better: bool) -> np.ndarray:
    """Paired ``log(head/base)`` of rounds where both values are finite and positive; + = worse."""
    pairs = [(b, h) for b, h in zip(base, head) if _valid(b, h)]
    if not pairs:
        return np.zeros(0)
    b, h = np.asarray(pairs, dtype=float).T
    ratios = np.log(h / b)
    return -ratios if higher_is_better else ratios


def _orders(item: PairedRounds) -> np.ndarray | None:
    """The head-first flags of the rounds ``log_ratios`` keeps, or None when they are not known."""
    if item.head_first is None or len(item.head_first) != len(item.base):
        return None
    return np.asarray([f for b, h, f in zip(item.base, item.head, item.head_first) if _valid(b, h)], dtype=bool)


@dataclass(frozen=True)
class _Fit:
    n: int
    mean: float
    sd: float  # of one round's d, floored by the known noise
    p_value: float
    se_factor: float = 0.0  # se = sd × se_factor; 0: the plain paired 1/√n
    dof: int = 0  # 0: n − 1

    @property
    def se(self) -> float:
        return self.sd * (self.se_factor or 1 / math.sqrt(self.n))

    def interval(self, confidence: float) -> tuple[float, float]:
        if self.se == 0.0:
            return self.mean, self.mean
        half = _t(1 - (1 - confidence) / 2, self.dof or self.n - 1) * self.se
        return self.mean - half, self.mean + half


def _fit(d: np.ndarray, noise_floor: float, head_first: np.ndarray | None = None) -> _Fit:
    """The paired fit; a crossover fit when both orders were run at least twice.

    A round that ran the head second carries any advantage of the second process slot
    (a warm page cache, a clock that ramped up, a neighbour's rhythm) as ``+π``, one that ran it
    first as ``−π``. Averaging the two orders' means removes π from the estimate and pooling
    the spread within each order keeps it out of the noise (the two-period crossover analysis,
    Jones & Kenward, *Design and Analysis of Cross-Over Trials*, ch. 2); with fewer than two
    rounds of each order, the plain paired mean.
    """
    n = len(d)
    floor = math.sqrt(2) * math.log1p(max(noise_floor, 0.0))
    if head_first is not None and len(head_first) == n and min(int(head_first.sum()), n - int(head_first.sum())) >= 2:
        first, second = d[head_first], d[~head_first]
        mean = float((first.mean() + second.mean()) / 2)
        within = float(((first - first.mean()) ** 2).sum() + ((second - second.mean()) ** 2).sum())
        sd = max(math.sqrt(within / (n - 2)), floor)
        se_factor = math.sqrt((1 / len(first) + 1 / len(second)) / 4)
        dof = n - 2
    else:
        mean = float(np.mean(d))
        sd = max(float(np.std(d, ddof=1)), floor)
        se_factor, dof = 1 / math.sqrt(n), n - 1
    if sd == 0.0:
        # Identical numbers every round (a quantised timer, a cached result): no spread to test.
        p_value = 1.0 if mean == 0.0 else 0.0
    else:
        p_value = float(2 * stats.t.sf(abs(mean) / (sd * se_factor), dof))
    return _Fit(n, mean, sd, p_value, se_factor, dof)


def _without_extreme(d: np.ndarray, head_first: np.ndarray | None,
                     sign: float) -> tuple[np.ndarray, np.ndarray | None]:
    """``d`` (and its orders) less its most extreme round in the direction of the claimed change."""
    drop = int(np.argmax(sign * d))
    return np.delete(d, drop), (None if head_first is None else np.delete(head_first, drop))


def rounds_to_settle(fit: _Fit, min_effect: float, alpha: float) -> int | None:
    """Rounds at which, at this noise, the marginal interval would settle the question.

    An estimate inside ``±min_effect`` settles as *none* once the half-width fits between it
    and the bound; one beyond settles once the half-width is below its size. ``None`` when not
    even ``ROUNDS_CAP`` rounds would do: the benchmark cannot be judged at ``min_effect`` here.
    """
    bound = math.log1p(min_effect)
    size = abs(fit.mean)
    room = bound - size if size < bound else size
    if room <= 0 or fit.sd == 0.0:
        return None if room <= 0 else fit.n
    settled = np.nonzero(_halfwidth_factors(alpha)[fit.n:] * fit.sd < room)[0]
    return fit.n + int(settled[0]) if len(settled) else None


def detectable(fit: _Fit, min_effect: float, alpha: float, n: int | None = None) -> float:
    """Smallest true change (relative) decided as a regression with 80 % power after ``n`` rounds."""
    n = n or fit.n
    se = fit.sd / math.sqrt(n)
    t_crit, t_power = _t(1 - alpha / 2, n - 1), _t(POWER, n - 1)
    return math.expm1(max(math.log1p(min_effect) + t_power * se, (t_crit + t_power) * se))


def smallest_detectable(noise: float, rounds: int, min_effect: float = DEFAULT_MIN_EFFECT,
                        alpha: float = DEFAULT_ALPHA) -> float:
    """Smallest change (relative) an A/B of ``rounds`` detects with 80 % power, at this noise.

    ``noise`` is one process's relative between-process spread (a series' run-to-run noise):
    what the dashboard shows per benchmark, so a team sees which cannot be judged at its
    ``min_effect`` on this device within the round cap.
    """
    sd = math.sqrt(2) * math.log1p(max(noise, 0.0))
    fit = _Fit(max(rounds, MIN_ROUNDS), 0.0, sd, 1.0)
    return detectable(fit, min_effect, alpha)


def can_judge(noise: float, rounds: int, min_effect: float = DEFAULT_MIN_EFFECT,
              alpha: float = DEFAULT_ALPHA) -> bool:
    """Whether ``rounds`` at this noise could show "no change" within ±``min_effect`` at all."""
    sd = math.sqrt(2) * math.log1p(max(noise, 0.0))
    n = max(rounds, MIN_ROUNDS)
    return _t(1 - alpha / 2, n - 1) * sd / math.sqrt(n) < math.log1p(min_effect)


def rounds_for(change: float, noise: float, rounds: int, min_effect: float = DEFAULT_MIN_EFFECT,
               alpha: float = DEFAULT_ALPHA) -> int | None:
    """Rounds that would settle a benchmark known as a report stores it — its relative ``change`` and one
    process's relative ``noise`` after ``rounds`` rounds — at ``min_effect`` (``rounds_to_settle``).

    Never fewer than one more than measured, nor than a change needs (it must hold without its most
    extreme round); ``None`` when not even ``ROUNDS_CAP`` would. A projection from the rounds so far.
    """
    n = max(rounds, MIN_ROUNDS)
    sd = math.sqrt(2) * math.log1p(max(noise, 0.0))
    needed = rounds_to_settle(_Fit(n, math.log1p(change), sd, 1.0), min_effect, alpha)
    return None if needed is None else max(needed, rounds + 1, MIN_ROUNDS + 1)


def min_effect_settled(change: float, noise: float, rounds: int, alpha: float = DEFAULT_ALPHA) -> float:
    """The smallest ``min_effect`` (relative) that ``rounds`` rounds at this noise would settle a benchmark at
    whose change is ``change``: its bound beyond the estimate plus the interval's half-width, rounded up
    to a whole percent (a tenth of one below 1 %), a figure a team would write."""
    n = max(rounds, MIN_ROUNDS + 1)
    sd = math.sqrt(2) * math.log1p(max(noise, 0.0))
    pct = math.expm1(abs(math.log1p(change)) + _t(1 - alpha / 2, n - 1) * sd / math.sqrt(n)) * 100
    step = 1.0 if pct >= 1.0 else 0.1
    return math.ceil(pct / step - 1e-9) * step / 100


def _undecided(rounds: int, min_effect: float, reason: str) -> ABVerdict:
    # No interval exists yet: 0, 0 with an infinite detectable size says so (and stays valid JSON).
    return ABVerdict(0.0, 0.0, 0.0, 1.0, 1.0, 0.0, min_effect * 100, math.inf, rounds,
                     "inconclusive", reason, rounds_needed=MIN_ROUNDS)


def verdicts(pairs: Sequence[PairedRounds | tuple[Sequence[float], Sequence[float], bool]], *,
             alpha: float = DEFAULT_ALPHA, min_effect: float = DEFAULT_MIN_EFFECT) -> list[ABVerdict]:
    """One verdict per benchmark, decided together (module docstring)."""
    items = [p if isinstance(p, PairedRounds) else PairedRounds(*p) for p in pairs]
    effects = [item.min_effect if item.min_effect is not None else min_effect for item in items]
    ds = [log_ratios(item.base, item.head, item.higher_is_better) for item in items]
    orders = [_orders(item) for item in items]
    fits = {i: _fit(d, item.noise_floor, order) for i, (d, item, order) in enumerate(zip(ds, items, orders))
            if len(d) >= MIN_ROUNDS}
    q_values = dict(zip(fits, fdr.adjust([fit.p_value for fit in fits.values()])))
    selected = [i for i in fits if q_values[i] < alpha]
    adjusted = change_confidence(len(selected), len(fits), alpha)
    out: list[ABVerdict] = []
    for i, (d, item, effect) in enumerate(zip(ds, items, effects)):
        if i not in fits:
            out.append(_undecided(len(d), effect, f"only {len(d)} paired round(s); need {MIN_ROUNDS}"))
            continue
        out.append(_decide(fits[i], d, orders[i], item.noise_floor, q_values[i], i in selected, effect, alpha,
                           adjusted))
    return out


def change_confidence(selected: int, tested: int, alpha: float = DEFAULT_ALPHA) -> float:
    """The level a change's interval is shown and held at: Benjamini–Yekutieli's ``1 − alpha·R/m`` for
    R changes selected among m benchmarks tested, under which the selected intervals cover at FCR ≤ alpha."""
    return 1 - alpha * max(selected, 1) / max(tested, 1)


def _decide(fit: _Fit, d: np.ndarray, head_first: np.ndarray | None, noise_floor: float, q: float,
            selected: bool, min_effect: float, alpha: float, change_confidence: float) -> ABVerdict:
    bound = math.log1p(min_effect)
    sign = 1.0 if fit.mean >= 0 else -1.0
    common = dict(p_value=fit.p_value, q_value=q, noise_pct=_pct(fit.sd / math.sqrt(2)),
                  threshold_pct=min_effect * 100, mde_pct=detectable(fit, min_effect, alpha) * 100,
                  rounds=fit.n)
    if selected and abs(fit.mean) > bound:
        low, high = fit.interval(change_confidence)
        rest = None
        if fit.n > MIN_ROUNDS:
            kept, kept_order = _without_extreme(d, head_first, sign)
            rest = _fit(kept, noise_floor, kept_order)
        held = rest is not None and sign * rest.interval(change_confidence)[0 if sign > 0 else 1] > 0
        if held:
            direction: Direction = "regression" if sign > 0 else "improvement"
            reason = (f"{_pct(fit.mean):+.1f}% [{_pct(low):+.1f}, {_pct(high):+.1f}] at "
                      f"{change_confidence:.2%} confidence, beyond the ±{min_effect:.0%} that counts")
            return ABVerdict(_pct(fit.mean), _pct(low), _pct(high), direction=direction, reason=reason,
                             confidence=change_confidence, **common)  # type: ignore[arg-type]
        one_more = max(fit.n + 1, MIN_ROUNDS + 1)
        reason = (f"{_pct(fit.mean):+.1f}% [{_pct(low):+.1f}, {_pct(high):+.1f}] rests on one round: "
                  "without its most extreme round it is not significant; more rounds will tell")
        return ABVerdict(_pct(fit.mean), _pct(low), _pct(high), direction="inconclusive", reason=reason,
                         confidence=change_confidence, rounds_needed=one_more, **common)  # type: ignore[arg-type]
    confidence = 1 - alpha
    low, high = fit.interval(confidence)
    if -bound <= low and high <= bound:
        reason = f"no change that counts: [{_pct(low):+.1f}, {_pct(high):+.1f}] lies within ±{min_effect:.0%}"
        return ABVerdict(_pct(fit.mean), _pct(low), _pct(high), direction="none", reason=reason,
                         confidence=confidence, **common)  # type: ignore[arg-type]
    needed = rounds_to_settle(fit, min_effect, alpha)
    if needed is None:
        settle = (f"at this noise (±{common['noise_pct']:.1f}% per process) not even {ROUNDS_CAP} rounds would "
                  f"settle ±{min_effect:.0%}: it cannot be judged at that size here; longer runs, a larger "
                  "shape or a quieter runner would help")
    else:
        settle = f"about {needed} rounds at this noise would settle it"
    if selected:
        reason = (f"{_pct(fit.mean):+.1f}% is significant but within ±{min_effect:.0%}, and the interval "
                  f"[{_pct(low):+.1f}, {_pct(high):+.1f}] reaches beyond it; {settle}")
    else:
        reason = f"the interval [{_pct(low):+.1f}, {_pct(high):+.1f}] reaches beyond ±{min_effect:.0%}; {settle}"
    return ABVerdict(_pct(fit.mean), _pct(low), _pct(high), direction="inconclusive", reason=reason,
                     confidence=confidence, rounds_needed=needed, **common)  # type: ignore[arg-type]


def overall(verdict_list: Sequence[ABVerdict]) -> Overall:
    """One word for a whole comparison: any regression wins, then inconclusive, then improvement."""
    directions = {v.direction for v in verdict_list}
    if "regression" in directions:
        return "regression"
    if "inconclusive" in directions:
        return "inconclusive"
    if "improvement" in directions:
        return "improvement"
    return "no-change"


def needs_more_rounds(verdict_list: Sequence[ABVerdict], cap: int | None = None) -> bool:
    """Some benchmark is undecided and more rounds — no more than ``cap`` in all — could decide it."""
    return any(v.direction == "inconclusive" and v.rounds_needed is not None
               and (cap is None or v.rounds_needed <= cap) for v in verdict_list)

