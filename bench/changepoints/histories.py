"""Acceptance histories: steps of fixed sizes under five kinds of timing noise, drift and GPU modes.

A second generator beside ``generator.py``. That one is what the detector's parameters were
first chosen on; this one is written from the noise a kernel team meets, with step sizes from a
fixed list so that recall can be read per size (``STEP_SIZES``), and it is scored on seeds that
no parameter was chosen on (``bench/changepoints/acceptance.py`` says which).

A series is one timing per commit (seconds, higher = slower), oldest first: 200 commits, 0-3
true changes (uniform, so a quarter of the series are clean), at least ``MIN_GAP`` commits apart
and from either end. A change is a ``location`` step, every value × (1 ± size) from then on, or —
in GPU-like bimodal series, one change in three — a ``mix`` change: the share of the slow mode
moves by ``MIX_SHIFT`` while neither mode moves. (An autotuner's two modes are closer than a
team's smallest change, so a move of its mix moves no mean that matters; it gets steps only.) Noise multiplies the level, at a relative scale
drawn from ``NOISE_LEVELS``:

``gaussian``
    normal jitter: a quiet dedicated machine.
``heavy-tail``
    Student-t jitter, df drawn in ``T_DF``, half of the series with only the slow tail (a
    timing is rarely far faster than its bulk, often far slower).
``spikes``
    normal jitter and slow episodes of 1-3 commits (a busy neighbour), 10-50 % slower, starting
    at a per-series rate in ``SPIKE_RATE``; one series in four also has single fast outliers.
``bimodal``
    normal jitter on two modes, half of the series an autotuner (two configurations
    ``AUTOTUNER_GAP`` apart) and half a GPU like the H200 of ``../shared/corpus/gpu-h200``,
    where a process's median lands near a fast mode or anywhere in a slow band ``GPU_GAP``
    above it (70 µs vs 95-118 µs there).
``drift``
    normal jitter on a slow movement that is no change: linear (``LINEAR_TOTAL`` over the
    series), a sinusoid (``SINE_AMPLITUDE``, period ``SINE_PERIOD`` commits, thermals or a
    nightly job) or a warm-up that settles (``WARMUP_TOTAL``, time constant ``WARMUP_TAU``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

KINDS: tuple[str, ...] = ("gaussian", "heavy-tail", "spikes", "bimodal", "drift")
NOISE_LEVELS: tuple[float, ...] = (0.003, 0.01, 0.03)
DRIFT_SHAPES: tuple[str, ...] = ("linear", "sinusoid", "warm-up")  # a drifting history's ``detail``
STEP_SIZES: tuple[float, ...] = (0.01, 0.02, 0.05, 0.10, 0.20, 0.30)

COMMITS = 200
MIN_GAP = 10
MAX_CHANGES = 3
BASE_SECONDS = 1e-4
MIX_SHARE = 1 / 3  # of the changes in a bimodal series
MIX_SHIFT = (0.25, 0.45)  # move of the slow mode's share at a mix change
SLOW_SHARE = (0.1, 0.5)  # share of the slow mode before any mix change
T_DF = (2.5, 5.0)
SPIKE_RATE = (0.01, 0.05)
SPIKE_LENGTH = (1, 3)
SPIKE_SLOWDOWN = (0.10, 0.50)
FAST_OUTLIER = (0.05, 0.20)  # single runs this much faster (a warm cache), in one spiky series in four
FAST_SHARE = 0.02  # ... at this share of its commits
AUTOTUNER_GAP = (0.02, 0.08)
GPU_GAP = (0.25, 0.45)  # bottom of the slow band over the fast mode
GPU_BAND = 0.25  # width of the slow band, relative to the fast mode
LINEAR_TOTAL = (0.01, 0.05)
SINE_AMPLITUDE = (0.005, 0.015)
SINE_PERIOD = (50.0, 200.0)
WARMUP_TOTAL = (0.01, 0.05)
WARMUP_TAU = (10.0, 60.0)


@dataclass(frozen=True)
class Change:
    """One true change: ``index`` is the first commit after it; ``size`` is signed (NaN for a mix change)."""

    index: int
    shift: str  # "location" or "mix"
    size: float


@dataclass(frozen=True)
class NoiseModel:
    """What made a history's noise, as log-value ``log(t) = log(level) + trend + e``: the density of ``e`` per commit.

    ``e`` is the jitter (``normal``; ``t``, Student-t of ``df`` degrees of freedom; ``half-t``, its absolute value)
    scaled by ``sigma``, plus, with probability ``slow_share`` at that commit, a slowdown ``log(1 + u)`` with ``u``
    uniform on ``slow_band`` (one value when the band is a point), and with probability ``fast_share`` a speed-up
    ``log(1 - u)``, ``u`` uniform on ``fast_band``. Episodes of a busy neighbour last 1-3 commits; the model gives
    each commit the marginal chance of lying in one. This is what the true-model oracle
    (``bench/changepoints/ceiling.py``) is told, beside the true changes' neighbours.
    """

    jitter: str  # "normal", "t" or "half-t"
    sigma: float  # log units
    df: float = math.inf
    slow_share: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)  # per commit; empty: none
    slow_band: tuple[float, float] = (0.0, 0.0)
    fast_share: float = 0.0
    fast_band: tuple[float, float] = (0.0, 0.0)
    trend: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)  # log drift per commit; empty: none


@dataclass
class History:
    values: np.ndarray
    changes: list[Change]
    kind: str
    noise: float
    detail: str  # the sub-kind: "autotuner", "gpu", "linear", "sinusoid", "warm-up", "two-sided", ...
    model: NoiseModel | None = None  # what generated the noise (None: not recorded)

    @property
    def indexes(self) -> list[int]:
        return [c.index for c in self.changes]


def _positions(rng: np.random.Generator, n: int) -> list[int]:
    count = int(rng.integers(0, MAX_CHANGES + 1))
    while True:
        found = sorted(int(i) for i in rng.integers(MIN_GAP, n - MIN_GAP + 1, size=count))
        if all(b - a >= MIN_GAP for a, b in zip(found, found[1:])):
            return found


def _signed(rng: np.random.Generator, low: float, high: float) -> float:
    return float(rng.uniform(low, high)) * (1.0 if rng.random() < 0.5 else -1.0)


def _changes(rng: np.random.Generator, n: int, mixes: bool) -> list[Change]:
    out = []
    for index in _positions(rng, n):
        if mixes and rng.random() < MIX_SHARE:
            out.append(Change(index, "mix", float("nan")))
        else:
            size = float(rng.choice(STEP_SIZES))
            out.append(Change(index, "location", size if rng.random() < 0.5 else -size))
    return out


def _level(n: int, changes: Sequence[Change]) -> np.ndarray:
    level = np.full(n, 1.0)
    for c in changes:
        if c.shift == "location":
            level[c.index:] *= 1.0 + c.size
    return level


def _slow_share(rng: np.random.Generator, n: int, changes: Sequence[Change]) -> np.ndarray:
    share = np.full(n, rng.uniform(*SLOW_SHARE))
    for c in changes:
        if c.shift != "mix":
            continue
        current = float(share[c.index])
        move = rng.uniform(*MIX_SHIFT)
        # away from whichever end is nearer, so the share stays a share
        share[c.index:] = current + move if current + move <= 0.9 else current - move
    return share


def _episode_share(rate: float) -> float:
    """Chance that a commit lies in a busy neighbour's episode: one starts there (any length), one commit before
    (length 2 or 3), or two before (length 3), lengths uniform on 1-3."""
    return 1.0 - (1.0 - rate) * (1.0 - rate * 2.0 / 3.0) * (1.0 - rate / 3.0)


def _noise(rng: np.random.Generator, kind: str, detail: str, noise: float, n: int,
           changes: Sequence[Change]) -> tuple[np.ndarray, str, NoiseModel]:
    jitter = np.exp(rng.normal(0.0, noise, n))
    normal = NoiseModel("normal", noise)
    if kind == "gaussian":
        return jitter, "normal", normal
    if kind == "heavy-tail":
        df = float(rng.uniform(*T_DF))
        t = rng.standard_t(df, n)
        if rng.random() < 0.5:
            return np.exp(noise * t), "two-sided", NoiseModel("t", noise, df)
        return np.exp(noise * np.abs(t)), "slow tail", NoiseModel("half-t", noise, df)
    if kind == "spikes":
        factor = np.ones(n)
        draws = rng.random(n)  # before the rate: the order of draws is what a seed means
        rate = float(rng.uniform(*SPIKE_RATE))
        for start in np.flatnonzero(draws < rate):
            length = int(rng.integers(SPIKE_LENGTH[0], SPIKE_LENGTH[1] + 1))
            factor[start:start + length] = 1.0 + rng.uniform(*SPIKE_SLOWDOWN)
        model = NoiseModel("normal", noise, slow_share=np.full(n, _episode_share(rate)), slow_band=SPIKE_SLOWDOWN)
        detail = "slow episodes"
        if rng.random() < 0.25:
            fast = rng.random(n) < FAST_SHARE
            factor[fast] *= 1.0 - rng.uniform(*FAST_OUTLIER, size=int(fast.sum()))
            detail = "slow episodes, fast outliers"
            model = NoiseModel("normal", noise, slow_share=model.slow_share, slow_band=SPIKE_SLOWDOWN,
                               fast_share=FAST_SHARE, fast_band=FAST_OUTLIER)
        return jitter * factor, detail, model
    if kind == "bimodal":
        draws = rng.random(n)  # before the share: the order of draws is what a seed means
        share = _slow_share(rng, n, changes)
        slow = draws < share
        if detail == "autotuner":
            gap = float(rng.uniform(*AUTOTUNER_GAP))
            return (jitter * np.where(slow, 1.0 + gap, 1.0), "autotuner",
                    NoiseModel("normal", noise, slow_share=share, slow_band=(gap, gap)))
        bottom = float(rng.uniform(*GPU_GAP))
        band = bottom + rng.uniform(0.0, GPU_BAND, n)
        return (jitter * np.where(slow, 1.0 + band, 1.0), "gpu",
                NoiseModel("normal", noise, slow_share=share, slow_band=(bottom, bottom + GPU_BAND)))
    if kind == "drift":
        t = np.arange(n, dtype=float)
        shape = DRIFT_SHAPES[int(rng.integers(len(DRIFT_SHAPES)))]
        if shape == "linear":
            drift = 1.0 + _signed(rng, *LINEAR_TOTAL) * t / (n - 1)
        elif shape == "sinusoid":
            period = rng.uniform(*SINE_PERIOD)
            drift = 1.0 + rng.uniform(*SINE_AMPLITUDE) * np.sin(2 * np.pi * t / period + rng.uniform(0, 2 * np.pi))
        else:
            drift = 1.0 + _signed(rng, *WARMUP_TOTAL) * (1.0 - np.exp(-t / rng.uniform(*WARMUP_TAU)))
        return jitter * drift, shape, NoiseModel("normal", noise, trend=np.log(drift))
    raise ValueError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")


def history(kind: str, noise: float, rng: np.random.Generator, n: int = COMMITS, clean: bool = False) -> History:
    """One history of ``n`` commits of noise ``kind`` at relative ``noise``; with ``clean``, one without changes."""
    if n < 2 * MIN_GAP:
        raise ValueError(f"n must be at least {2 * MIN_GAP}")
    detail = ("autotuner", "gpu")[int(rng.integers(2))] if kind == "bimodal" else ""
    changes = [] if clean else _changes(rng, n, mixes=detail == "gpu")
    factor, detail, model = _noise(rng, kind, detail, noise, n, changes)
    values = BASE_SECONDS * float(np.exp(rng.uniform(-2.0, 2.0))) * _level(n, changes) * factor
    return History(values, changes, kind, noise, detail, model)


def cell(kind: str, noise: float, count: int, seed: int, n: int = COMMITS) -> list[History]:
    """``count`` histories of one kind × noise cell; each cell has its own stream, so cells never share draws."""
    rng = np.random.default_rng([seed, 31, KINDS.index(kind), NOISE_LEVELS.index(noise)])
    return [history(kind, noise, rng, n) for _ in range(count)]


def clean_cell(kind: str, noise: float, count: int, seed: int, n: int = COMMITS) -> list[History]:
    """``count`` change-free histories of one cell, from a stream of their own (never one of ``cell``'s)."""
    rng = np.random.default_rng([seed, 37, KINDS.index(kind), NOISE_LEVELS.index(noise)])
    return [history(kind, noise, rng, n, clean=True) for _ in range(count)]
