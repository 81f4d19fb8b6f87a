"""How many true changes the scoring lets anyone find: an oracle's recall beside the detectors'.

A detection counts only within ``tolerance`` commits of its true change, so a step must be both
seen and placed. Placing is what small steps in loud noise lose first: a 2 % step in 3 % noise
is 0.67 σ, and in gaussian noise even its maximum-likelihood position lands more than 3 commits
off in about half of the histories. The oracle here is told what no detector knows — that a
location change exists and where its true neighbours are (the changes either side, or the ends) —
and places it at the least-squares split of the log-values between them: the maximum-likelihood
position of one step in gaussian noise.

On gaussian histories that is the ceiling of any detector's recall under this scoring. Under the
other kinds it is a reference, not a bound (a robust split can beat least squares among heavy
tails and spikes; drift and modes mislead it). Mix changes move no level: the oracle has nothing
to place and they are left out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bench.changepoints.histories import Change, History


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


def oracle_found(history: History, tolerance: int) -> list[bool | None]:
    """Per true change: whether the oracle's split lies within ``tolerance``; None for a mix change."""
    x = np.log(history.values)
    bounds = [0, *history.indexes, len(x)]
    out: list[bool | None] = []
    for i, change in enumerate(history.changes):
        if change.shift != "location":
            out.append(None)
            continue
        lo, hi = bounds[i], bounds[i + 2]
        out.append(abs(lo + least_squares_split(x[lo:hi]) - change.index) <= tolerance)
    return out


def located(histories: Sequence[History], tolerance: int) -> list[tuple[Change, bool]]:
    """Every location change of ``histories`` with whether the oracle placed it."""
    return [(change, bool(ok)) for h in histories
            for change, ok in zip(h.changes, oracle_found(h, tolerance)) if ok is not None]


def main(argv: Sequence[str] | None = None) -> int:
    """Print the oracle's recall on many gaussian histories: the ceiling per noise level and step size."""
    import argparse

    from rich.console import Console

    from bench.changepoints import histories as generator
    from bench.changepoints.report import Table, print_rich

    parser = argparse.ArgumentParser(prog="python -m bench.changepoints.ceiling", description=main.__doc__)
    parser.add_argument("--seeds", default="200-259", help="a range FIRST-LAST of seeds (default: 200-259)")
    parser.add_argument("--per-cell", type=int, default=20)
    parser.add_argument("--tolerance", type=int, default=3)
    args = parser.parse_args(argv)
    first, _, last = args.seeds.partition("-")
    seeds = range(int(first), int(last or first) + 1)
    hit: dict[tuple[str, float], int] = {}
    total: dict[tuple[str, float], int] = {}
    for noise in generator.NOISE_LEVELS:
        for seed in seeds:
            for change, ok in located(generator.cell("gaussian", noise, args.per_cell, seed), args.tolerance):
                for key in ((f"{noise * 100:g} %", abs(change.size)), ("all", abs(change.size))):
                    total[key] = total.get(key, 0) + 1
                    hit[key] = hit.get(key, 0) + int(ok)
    sizes = generator.STEP_SIZES
    table = Table(f"Oracle recall on gaussian histories, seeds {args.seeds} (±{args.tolerance} commits)",
                  ["noise", *(f"{s * 100:g} %" for s in sizes)])
    for label in [*(f"{n * 100:g} %" for n in generator.NOISE_LEVELS), "all"]:
        table.add(label, *(f"{hit.get((label, s), 0) / total[(label, s)]:.3f} ({total[(label, s)]})"
                           if total.get((label, s)) else "—" for s in sizes), new_section=label == "all")
    print_rich(Console(), table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
