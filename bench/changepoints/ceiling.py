"""How many true changes the scoring lets anyone find: oracles' recall beside the detectors'.

A detection counts only within ``tolerance`` commits of its true change, so a step must be both
seen and placed. Placing is what small steps in loud noise lose first: a 2 % step in 3 % noise
is 0.67 σ, and in gaussian noise even its maximum-likelihood position lands more than 3 commits
off in about half of the histories. Every oracle here is told what no detector knows — that a
location change exists and where its true neighbours are (the changes either side, or the ends):

``least squares``
    the least-squares split of the log-values between the neighbours: the maximum-likelihood
    place of one step in gaussian noise, and only there.
``true model`` (the ceiling)
    the maximum-likelihood split under the noise that truly made the history
    (``likelihood.likeliest_split``: a Student-t's degrees of freedom, a busy neighbour's rate and
    slowdown, an autotuner's gap and share, a GPU's slow band, the drift's very curve). No
    detector knows more about a history's noise than its generator; this is what the goals are a
    share of.
``true model, detecting``
    the same placement, counted only when the step's likelihood gain also passes the threshold
    that gives 0.05 false alarms per clean series of its kind, sub-kind and noise level
    (``detection_threshold``: the 95th percentile of the largest gain, sides of at least
    ``DETECT_MIN_SIDE`` commits, on change-free histories of ``CALIBRATION_SEED``'s own stream,
    never a scored one): the ceiling of a detector held to the false-alarm budget. Per sub-kind,
    because the oracle knows it: a slow-tail-only density places a level by its lowest value, so
    its gains run far higher on clean series than a two-sided t's, whose steps a shared threshold
    would then miss.

Mix changes move no level: the oracles have nothing to place and they are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from multiprocessing import get_context
from typing import TypeVar

import numpy as np

from bench.changepoints import histories as generator
from bench.changepoints.histories import Change, History
from bench.changepoints.likelihood import likeliest_split

FALSE_ALARMS = 0.05  # per clean series: the budget the detecting oracle is held to, as every detector is
CALIBRATION_SEED = 1000  # clean histories for the thresholds: a stream no scored history is drawn from
CALIBRATION_SERIES = 600  # per kind × noise level, 150-300 per sub-kind
T = TypeVar("T")
R = TypeVar("R")
K = TypeVar("K")
DETECT_MIN_SIDE = 5  # commits each side of a split the detecting oracle tests (roofwatch's DEFAULT_MIN_SIZE)


def least_squares_split(values: np.ndarray) -> int:
    """The split ``k`` (first index after it, 1 ≤ k < n) that minimises the two sides' squared deviations."""
    n = len(values)
    if n < 2:
        raise ValueError("a split needs at least two values")
    sums = np.cumsum(values)
    k = np.arange(1, n)
    left, right = sums[k - 1], sums[-1] - sums[k - 1]
    # the between-sides sum of squares; maximising it minimises the within-sides one
    gain = (left / k - right / (n - k)) ** 2 * k * (n - k) / n
    return int(k[np.argmax(gain)])


def _stretches(history: History) -> list[tuple[int, int] | None]:
    """Per true change, the commits between its true neighbours; None for a mix change."""
    bounds = [0, *history.indexes, len(history.values)]
    return [(bounds[i], bounds[i + 2]) if change.shift == "location" else None
            for i, change in enumerate(history.changes)]


def oracle_found(history: History, tolerance: int) -> list[bool | None]:
    """Per true change: whether the least-squares split lies within ``tolerance``; None for a mix change."""
    x = np.log(history.values)
    return [None if s is None else abs(s[0] + least_squares_split(x[s[0]:s[1]]) - c.index) <= tolerance
            for c, s in zip(history.changes, _stretches(history))]


def located(histories: Sequence[History], tolerance: int) -> list[tuple[Change, bool]]:
    """Every location change of ``histories`` with whether the least-squares oracle placed it."""
    return [(change, bool(ok)) for h in histories
            for change, ok in zip(h.changes, oracle_found(h, tolerance)) if ok is not None]


Thresholds = dict[tuple[str, str, float], float]  # (kind, sub-kind, noise level) -> likelihood gain, nats


def _cell_thresholds(cell: tuple[str, float, int, int]) -> Thresholds:
    kind, noise, series, seed = cell
    gains: dict[str, list[float]] = {}
    for h in generator.clean_cell(kind, noise, series, seed):
        split = likeliest_split(np.log(h.values), model_of(h), 0, len(h.values), DETECT_MIN_SIDE)
        gains.setdefault(h.detail, []).append(split.gain)
    return {(kind, detail, noise): float(np.quantile(g, 1.0 - FALSE_ALARMS)) for detail, g in gains.items()}


@lru_cache(maxsize=4)
def detection_thresholds(processes: int = 1, series: int = CALIBRATION_SERIES, seed: int = CALIBRATION_SEED
                         ) -> Thresholds:
    """The likelihood gain that clean histories of each kind, sub-kind and noise level pass at ``FALSE_ALARMS``
    per series."""
    return per_cell(_cell_thresholds, processes, series, seed)


def per_cell(calibrate: Callable[[tuple[str, float, int, int]], dict[K, float]], processes: int, series: int,
             seed: int) -> dict[K, float]:
    """``calibrate`` on each kind × noise level cell (kind, noise level, ``series`` clean histories, ``seed``), its
    parts merged into one table."""
    cells = [(kind, noise, series, seed) for kind in generator.KINDS for noise in generator.NOISE_LEVELS]
    out: dict[K, float] = {}
    for part in map_processes(calibrate, cells, processes):
        out |= part
    return out


def map_processes(function: Callable[[T], R], items: Sequence[T], processes: int) -> list[R]:
    """``function`` over ``items`` in order, in ``processes`` forked workers when more than one."""
    if processes <= 1:
        return [function(item) for item in items]
    with get_context("fork").Pool(processes) as pool:
        return pool.map(function, items, chunksize=1)


def model_of(history: History) -> generator.NoiseModel:
    """The noise model ``history`` was generated under, which only an oracle is told."""
    if history.model is None:
        raise ValueError("the true-model oracle needs the history's noise model")
    return history.model


@dataclass(frozen=True)
class Verdict:
    """What the true-model oracle makes of one location change."""

    change: Change
    kind: str
    noise: float
    placed: bool  # its likeliest split lies within the tolerance
    detected: bool  # ... and its gain passes the false-alarm threshold
    passes: bool  # its gain passes the false-alarm threshold, wherever its split lies (a false alarm when not placed)


def true_model(history: History, tolerance: int, thresholds: Thresholds) -> list[Verdict]:
    """The true-model oracle's verdict on every location change of ``history``."""
    x = np.log(history.values)
    model = model_of(history)
    out = []
    for change, stretch in zip(history.changes, _stretches(history)):
        if stretch is None:
            continue
        split = likeliest_split(x, model, *stretch)
        placed = abs(split.index - change.index) <= tolerance
        passes = split.gain > thresholds[(history.kind, history.detail, history.noise)]
        out.append(Verdict(change, history.kind, history.noise, placed, placed and passes, passes))
    return out


def _verdicts(task: tuple[History, int, Thresholds]) -> list[Verdict]:
    return true_model(*task)


def verdicts(histories: Sequence[History], tolerance: int, processes: int = 1,
             calibration: int = CALIBRATION_SERIES) -> list[list[Verdict]]:
    """Per history, the true-model oracle's verdicts (thresholds calibrated first, on ``calibration`` clean
    histories per kind × noise level)."""
    thresholds = detection_thresholds(processes, calibration)
    return map_processes(_verdicts, [(h, tolerance, thresholds) for h in histories], processes)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the oracles' recall per kind, noise level and step size: least squares, true model, true model detecting."""
    import argparse

    from rich.console import Console

    from bench.changepoints.report import Table, print_rich

    parser = argparse.ArgumentParser(prog="python -m bench.changepoints.ceiling", description=main.__doc__)
    parser.add_argument("--seeds", default="200-259", help="a range FIRST-LAST of seeds (default: 200-259)")
    parser.add_argument("--per-cell", type=int, default=20)
    parser.add_argument("--tolerance", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    first, _, last = args.seeds.partition("-")
    seeds = range(int(first), int(last or first) + 1)
    every = [h for kind in generator.KINDS for noise in generator.NOISE_LEVELS for seed in seeds
             for h in generator.cell(kind, noise, args.per_cell, seed)]
    least_squares = [ok for h in every for ok in oracle_found(h, args.tolerance) if ok is not None]
    true = [v for one in verdicts(every, args.tolerance, args.jobs) for v in one]
    counts: dict[tuple[str, str, float], list[int]] = {}  # (kind, noise, size) -> [total, ls, placed, detected]
    for v, by_least_squares in zip(true, least_squares, strict=True):
        for key in ((v.kind, f"{v.noise * 100:g} %", abs(v.change.size)), (v.kind, "all", abs(v.change.size)),
                    ("all", "all", abs(v.change.size))):
            tallied = counts.setdefault(key, [0, 0, 0, 0])
            for i, ok in enumerate((True, by_least_squares, v.placed, v.detected)):
                tallied[i] += int(ok)
    sizes = generator.STEP_SIZES
    table = Table(f"Oracles' recall, seeds {args.seeds} (±{args.tolerance} commits): least squares / true model / "
                  f"true model detecting at {FALSE_ALARMS} false alarms per clean series",
                  ["kind", "noise", *(f"{s * 100:g} %" for s in sizes)])
    labels = [(k, n) for k in generator.KINDS for n in [*(f"{x * 100:g} %" for x in generator.NOISE_LEVELS), "all"]]
    for kind, noise in [*labels, ("all", "all")]:
        row: list[str] = []
        for s in sizes:
            steps, ls, placed, detected = counts.get((kind, noise, s), [0, 0, 0, 0])
            row.append(f"{ls / steps:.3f} / {placed / steps:.3f} / {detected / steps:.3f} ({steps})" if steps else "—")
        table.add(kind, noise, *row, new_section=noise == "0.3 %" or kind == "all")
    print_rich(Console(width=220), table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
