"""How fast is roofwatch's detector at the scale of a large kernel library?

``python -m bench.changepoints.speed [--series 10000] [--points 500] [--jobs 2]`` analyses a
synthetic history (the ``mixed`` family, the hardest) of that many series × commits, then
times the incremental update — one new commit appended to one series and that series
searched again, which is what analysing one run does per benchmark.
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from rich.console import Console
from rich.table import Table

from bench.changepoints.generator import generate_cell
from roofwatch.service.analysis.changepoints import detect


def _detect_many(chunk: list[np.ndarray]) -> int:
    return sum(len(detect(values)) for values in chunk)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=10_000)
    parser.add_argument("--points", type=int, default=500)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    console = Console()

    with console.status(f"generating {args.series:,} series × {args.points} commits"):
        series = [s.values for s in generate_cell("mixed", 0.01, args.series, 0, n=args.points)]
    chunks = [series[i::args.jobs] for i in range(args.jobs)]
    start = time.perf_counter()
    with console.status(f"analysing on {args.jobs} process(es)"), ProcessPoolExecutor(args.jobs) as pool:
        found = sum(pool.map(_detect_many, chunks))
    full = time.perf_counter() - start

    rng = np.random.default_rng(1)
    history = list(series[0])
    times = []
    for _ in range(50):
        history.append(history[-1] * float(np.exp(rng.normal(0, 0.01))))
        tick = time.perf_counter()
        detect(history[-args.points:])
        times.append(time.perf_counter() - tick)

    table = Table("measurement", "value", "goal")
    table.add_row(f"full analysis, {args.series:,} × {args.points}", f"{full:.1f} s ({found:,} change points)", "< 60 s")
    table.add_row("per series", f"{full / args.series * 1e3 * args.jobs:.2f} ms (one core)", "")
    table.add_row("incremental update, one new commit (p50 / max of 50)",
                  f"{np.median(times) * 1e3:.2f} ms / {max(times) * 1e3:.2f} ms", "< 1 s")
    console.print(table)


if __name__ == "__main__":
    main()
