"""Seeded synthetic benchmark histories with known change points.

A series is what roofwatch stores per benchmark: one timing per commit (seconds, higher = slower,
around a base of ~1 ms), oldest first. Its level is piecewise constant: 0-3 true changes (drawn
uniformly), each a relative step of 1-30 % in a random direction, at least ``MIN_GAP`` commits
apart and from either end. Everything else is noise that a detector must *not* report, and every
noise term multiplies the level, because timing noise scales with the time measured.

Noise families (each at relative noise 0.3 %, 1 % and 3 %, ``NOISE_LEVELS``):

``gaussian``
    iid normal jitter, sd = noise. The textbook case: a quiet dedicated machine where timer
    resolution, cache state and clock jitter add up to something bell-shaped.
``heavy-tail``
    Student-t (df=3) jitter with scale = noise. Real timing distributions have tails: an
    interrupt, a page fault, a GC pause or a late-scheduled thread make the odd run far slower
    (or, after warm-up effects, faster) than the bulk. A mean-and-sd detector sees such points
    as steps.
``spikes``
    gaussian jitter plus environmental slow runs: with probability ~3 % per commit a run of 1-3
    consecutive commits is 10-50 % slower. This is the noisy neighbour on a shared CI host (a
    co-scheduled job, a backup, a throttled shared GPU) that spans a few commits and goes away.
    It is the main source of false alarms for window-based detectors.
``bimodal``
    gaussian jitter plus two-level noise: each commit independently lands on one of two modes
    2-6 % apart, the upper mode with probability p in [0.2, 0.5] fixed per series. This is an
    autotuner (Triton, cuBLAS heuristics) picking one of two near-tied configurations, or a
    memory allocator / NUMA placement landing two ways. A step smaller than the mode gap is
    hard to see and a run of upper-mode points looks like a step.
``drift``
    gaussian jitter plus a slow linear drift totalling 1-5 % over the series (random sign): thermal
    drift, a slowly filling disk or page cache, gradual dependency updates. Not a change point;
    a detector that cuts a ramp into steps is wrong.
``mixed``
    All of the above at once (heavy-tail jitter, spikes, bimodal modes, drift): what a busy GPU
    CI fleet actually produces.

Indexes follow the roofwatch convention (DESIGN §4): a change at ``i`` means ``values[i]`` is the
first value after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

FAMILIES: tuple[str, ...] = ("gaussian", "heavy-tail", "spikes", "bimodal", "drift", "mixed")
NOISE_LEVELS: tuple[float, ...] = (0.003, 0.01, 0.03)

BASE_SECONDS = 1e-3
MIN_GAP = 10  # commits between two changes, and between a change and either end
MAX_CHANGES = 3
STEP_RANGE = (0.01, 0.30)  # relative size of one true step
SPIKE_RATE = 0.03  # probability per commit that a slow episode starts
SPIKE_LENGTH = (1, 3)  # commits per slow episode, inclusive
SPIKE_SLOWDOWN = (0.10, 0.50)
MODE_GAP = (0.02, 0.06)  # relative distance between the two autotuner modes
MODE_PROBABILITY = (0.2, 0.5)  # chance of landing on the slow mode
DRIFT_TOTAL = (0.01, 0.05)  # relative drift from first to last commit
T_DF = 3


@dataclass
class Series:
    """One synthetic history: ``values`` in seconds, ``changes`` the 0-based first index after each true change."""

    values: np.ndarray
    changes: list[int]
    family: str
    noise: float
    # the multiplicative components, kept so a failing case can be inspected
    components: dict[str, np.ndarray] = field(default_factory=dict, repr=False)


def draw_changes(rng: np.random.Generator, n: int) -> list[int]:
    """0-3 change indexes, pairwise >= MIN_GAP apart and >= MIN_GAP from both ends (rejection sampling)."""
    k = int(rng.integers(0, MAX_CHANGES + 1))
    lo, hi = MIN_GAP, n - MIN_GAP  # hi inclusive: n - c >= MIN_GAP points after the change
    while True:
        cps = sorted(int(c) for c in rng.integers(lo, hi + 1, size=k))
        if all(b - a >= MIN_GAP for a, b in zip(cps, cps[1:])):
            return cps


def level_path(rng: np.random.Generator, n: int, changes: Sequence[int]) -> np.ndarray:
    """Piecewise-constant level: each change multiplies it by (1 ± s), s ~ U(STEP_RANGE)."""
    base = BASE_SECONDS * float(np.exp(rng.uniform(-1.0, 1.0)))
    level = np.full(n, base)
    for c in changes:
        s = rng.uniform(*STEP_RANGE)
        level[c:] *= 1.0 + (s if rng.random() < 0.5 else -s)
    return level


def gaussian_jitter(rng: np.random.Generator, n: int, noise: float) -> np.ndarray:
    return 1.0 + rng.normal(0.0, noise, n)


def heavy_tail_jitter(rng: np.random.Generator, n: int, noise: float) -> np.ndarray:
    # exp() keeps a far tail draw positive (a t3 draw of -40 at 3 % would otherwise give a negative
    # time); for the bulk, exp(x) ~ 1 + x so the scale is still ~noise.
    return np.exp(noise * rng.standard_t(T_DF, n))


def spike_factor(rng: np.random.Generator, n: int) -> np.ndarray:
    """1 everywhere except slow episodes of 1-3 commits, 10-50 % slower (one slowdown per episode)."""
    factor = np.ones(n)
    for start in np.flatnonzero(rng.random(n) < SPIKE_RATE):
        length = int(rng.integers(SPIKE_LENGTH[0], SPIKE_LENGTH[1] + 1))
        factor[start:start + length] = 1.0 + rng.uniform(*SPIKE_SLOWDOWN)
    return factor


def bimodal_factor(rng: np.random.Generator, n: int) -> np.ndarray:
    gap = rng.uniform(*MODE_GAP)
    p_slow = rng.uniform(*MODE_PROBABILITY)
    return np.where(rng.random(n) < p_slow, 1.0 + gap, 1.0)


def drift_factor(rng: np.random.Generator, n: int) -> np.ndarray:
    total = rng.uniform(*DRIFT_TOTAL) * (1.0 if rng.random() < 0.5 else -1.0)
    return 1.0 + total * np.linspace(0.0, 1.0, n)


def noise_components(family: str, noise: float, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """The multiplicative noise factors of one family, by name."""
    if family == "gaussian":
        return {"jitter": gaussian_jitter(rng, n, noise)}
    if family == "heavy-tail":
        return {"jitter": heavy_tail_jitter(rng, n, noise)}
    if family == "spikes":
        return {"jitter": gaussian_jitter(rng, n, noise), "spikes": spike_factor(rng, n)}
    if family == "bimodal":
        return {"jitter": gaussian_jitter(rng, n, noise), "modes": bimodal_factor(rng, n)}
    if family == "drift":
        return {"jitter": gaussian_jitter(rng, n, noise), "drift": drift_factor(rng, n)}
    if family == "mixed":
        return {
            "jitter": heavy_tail_jitter(rng, n, noise),
            "spikes": spike_factor(rng, n),
            "modes": bimodal_factor(rng, n),
            "drift": drift_factor(rng, n),
        }
    raise ValueError(f"unknown family {family!r}; expected one of {', '.join(FAMILIES)}")


def generate(family: str, noise: float, rng: np.random.Generator, n: int = 200) -> Series:
    """One history of ``n`` commits from noise ``family`` at relative ``noise``."""
    if n < 2 * MIN_GAP:
        raise ValueError(f"n must be at least {2 * MIN_GAP}")
    changes = draw_changes(rng, n)
    level = level_path(rng, n, changes)
    components = noise_components(family, noise, rng, n)
    values = level * np.prod(np.vstack(list(components.values())), axis=0)
    # gaussian jitter at 3 % cannot reach -100 % in practice, but a timing must stay positive
    values = np.maximum(values, level * 1e-3)
    return Series(values=values, changes=changes, family=family, noise=noise, components=components)


def cell_rng(seed: int, family: str, noise: float) -> np.random.Generator:
    """An independent stream per (family, noise) cell, so adding a family leaves the others' series unchanged."""
    return np.random.default_rng([seed, FAMILIES.index(family), NOISE_LEVELS.index(noise)])


def generate_cell(family: str, noise: float, count: int, seed: int, n: int = 200) -> list[Series]:
    rng = cell_rng(seed, family, noise)
    return [generate(family, noise, rng, n) for _ in range(count)]


def clean_fraction(series: Sequence[Series]) -> float:
    """Share of change-free series: false alarms are measured on these, so the benchmark needs enough (~25 %)."""
    return sum(not s.changes for s in series) / len(series) if series else 0.0
