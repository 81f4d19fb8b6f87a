"""The A/B verdict rule on simulated rounds: false alarms on A/A, detection of planted changes.

    python -m bench.verdicts [--comparisons N] [--benchmarks B] [--max-rounds R] [--seed S]
                             [--markdown FILE]

Each simulated comparison measures ``B`` benchmarks in interleaved rounds exactly as the worker
does (``roofwatch.ab.abtest``: at least 3 rounds, a round added while any
benchmark is undecided and could still be decided, up to ``R``). A process's value is the
benchmark's true level times ``exp(noise)``, the noise drawn independently per process from
one of three kinds, at a relative size of 1–50 %:

* ``normal``: log-normal, sd = size;
* ``heavy``: Student t with 3 degrees of freedom, scaled to the same sd (a few wild processes);
* ``bimodal``: a process is in a slow state with probability 0.3, ``2 × size`` slower, plus a
  normal spread of size / 4 (the H200's per-process behaviour, docs/analysis.md).

For each kind and size it reports, over all benchmark-comparisons: false regressions and false
improvements on A/A (head = base), the median smallest detectable change (``mde_pct``) the A/A
comparisons reported at the round cap, and the share of benchmarks detected as regressions when
the head is slower by twice that. Targets (DESIGN §6): false regressions ≤ 1 %, detection ≥ 80 %.
Seeded: the same arguments print the same table.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from roofwatch.ab import abtest

KINDS = ("normal", "heavy", "bimodal")
SIZES = (0.01, 0.02, 0.05, 0.10, 0.20, 0.50)
SLOW_SHARE = 0.3

Noise = Callable[[np.random.Generator, int], np.ndarray]


def noise(kind: str, size: float) -> Noise:
    """Log-scale per-process noise of one kind and relative size."""
    if kind == "normal":
        return lambda rng, n: rng.normal(0.0, size, n)
    if kind == "heavy":
        scale = size / math.sqrt(3.0)  # t(3) has variance 3
        return lambda rng, n: scale * rng.standard_t(3, n)
    if kind == "bimodal":
        def draw(rng: np.random.Generator, n: int) -> np.ndarray:
            slow = rng.random(n) < SLOW_SHARE
            return np.where(slow, math.log1p(2 * size), 0.0) + rng.normal(0.0, size / 4, n)
        return draw
    raise ValueError(f"unknown noise kind {kind!r}")


@dataclass(frozen=True)
class Outcome:
    directions: list[str]
    mde_pct: list[float]
    rounds: int


def simulate(rng: np.random.Generator, draw: Noise, change: float, benchmarks: int, max_rounds: int) -> Outcome:
    """One comparison: rounds added until every benchmark is decided (or cannot be) or the cap."""
    base: list[list[float]] = [[] for _ in range(benchmarks)]
    head: list[list[float]] = [[] for _ in range(benchmarks)]
    found: list[abtest.ABVerdict] = []
    for done in range(1, max_rounds + 1):
        b, h = np.exp(draw(rng, benchmarks)), (1 + change) * np.exp(draw(rng, benchmarks))
        for i in range(benchmarks):
            base[i].append(float(b[i]))
            head[i].append(float(h[i]))
        if done < abtest.MIN_ROUNDS:
            continue
        found = abtest.verdicts([abtest.PairedRounds(base[i], head[i]) for i in range(benchmarks)])
        if not abtest.needs_more_rounds(found, max_rounds):
            break
    return Outcome([v.direction for v in found], [v.mde_pct for v in found], done)


@dataclass(frozen=True)
class Row:
    kind: str
    size: float
    false_regressions: float
    false_improvements: float
    inconclusive_aa: float
    mde_pct: float
    detected: float
    mean_rounds: float


def measure(kind: str, size: float, comparisons: int, benchmarks: int, max_rounds: int, seed: int) -> Row:
    rng = np.random.default_rng([seed, KINDS.index(kind), int(size * 1000)])
    draw = noise(kind, size)
    aa = [simulate(rng, draw, 0.0, benchmarks, max_rounds) for _ in range(comparisons)]
    directions = [d for o in aa for d in o.directions]
    total = len(directions)
    mdes = [m for o in aa if o.rounds == max_rounds for m in o.mde_pct if math.isfinite(m)]
    mde = float(np.median(mdes)) if mdes else float(np.median([m for o in aa for m in o.mde_pct]))
    planted = [simulate(rng, draw, 2 * mde / 100, benchmarks, max_rounds) for _ in range(comparisons)]
    detected = [d for o in planted for d in o.directions]
    return Row(kind, size, directions.count("regression") / total, directions.count("improvement") / total,
               directions.count("inconclusive") / total, mde, detected.count("regression") / len(detected),
               float(np.mean([o.rounds for o in aa + planted])))


def table(rows: list[Row], title: str) -> Table:
    out = Table(title=title)
    for name in ("noise", "size", "false regressions", "false improvements", "A/A inconclusive",
                 "reported MDE", "detected at 2×MDE", "mean rounds"):
        out.add_column(name, justify="right" if name not in ("noise",) else "left")
    for r in rows:
        out.add_row(r.kind, f"{r.size:.0%}", f"{r.false_regressions:.2%}", f"{r.false_improvements:.2%}",
                    f"{r.inconclusive_aa:.1%}", f"{r.mde_pct:.1f}%", f"{r.detected:.1%}", f"{r.mean_rounds:.1f}")
    return out


def markdown(rows: list[Row], title: str) -> str:
    lines = [f"**{title}**", "",
             "| noise | size | false regressions | false improvements | A/A inconclusive | reported MDE "
             "| detected at 2×MDE | mean rounds |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r.kind} | {r.size:.0%} | {r.false_regressions:.2%} | {r.false_improvements:.2%} | "
              f"{r.inconclusive_aa:.1%} | {r.mde_pct:.1f}% | {r.detected:.1%} | {r.mean_rounds:.1f} |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.verdicts", description=__doc__.splitlines()[0])
    parser.add_argument("--comparisons", type=int, default=200, help="simulated comparisons per cell and arm")
    parser.add_argument("--benchmarks", type=int, default=10, help="benchmarks per comparison")
    parser.add_argument("--max-rounds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--sizes", default=",".join(f"{s:g}" for s in SIZES), help="relative noise sizes")
    parser.add_argument("--markdown", type=Path, help="also write the table as Markdown here")
    args = parser.parse_args(argv)
    rows = [measure(kind, float(size), args.comparisons, args.benchmarks, args.max_rounds, args.seed)
            for kind in args.kinds.split(",") for size in args.sizes.split(",")]
    title = (f"A/B verdicts: {args.comparisons} comparisons × {args.benchmarks} benchmarks per cell and arm, "
             f"3–{args.max_rounds} rounds, min_effect {abtest.DEFAULT_MIN_EFFECT:.0%}, "
             f"alpha {abtest.DEFAULT_ALPHA}, seed {args.seed}")
    Console(width=200).print(table(rows, title))
    worst = max(r.false_regressions for r in rows)
    weakest = min(r.detected for r in rows)
    print(f"worst false-regression rate {worst:.2%} (target ≤ 1 %); weakest detection at 2×MDE {weakest:.1%} "
          "(target ≥ 80 %)")
    if args.markdown:
        args.markdown.write_text(markdown(rows, title))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
