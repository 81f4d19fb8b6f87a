"""How fast is roofwatch's detector at the scale of a large kernel library?

``python -m bench.changepoints.speed [--series 10000] [--points 500] [--jobs 2]`` analyses a
synthetic history of that many series × commits (the old generator's ``mixed`` family, the
hardest, and the acceptance histories' five kinds in turn), then times the incremental update:
one new commit appended to every series at once (``analysis.watch.Watch``), which is what
reading one main-branch run does. One BLAS thread per process: the regressions are small, and
threads only fight over the cores. Each time is given as wall clock and as the CPU time the
work itself took (its processes' own), which a host shared with other jobs does not inflate.

A slower host does inflate it (``bench.changepoints.host`` says by how much it has). So each process also runs that
module's fixed workload between slices of its analysis, and the bench between its new commits, and gives the CPU
times again scaled to the host of ``host.REFERENCE_MS`` by how fast the workload ran meanwhile: compare commits, or
days, on the scaled line.
"""

from __future__ import annotations

import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402  (after the thread settings, which numpy reads when it loads)
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.changepoints import histories, host  # noqa: E402
from bench.changepoints.generator import generate_cell  # noqa: E402
from roofwatch.service.analysis.changepoints import ChangePoint, detect  # noqa: E402
from roofwatch.service.analysis.watch import Watch  # noqa: E402

APPENDS = 10  # commits appended to every series, one at a time
HOST_SAMPLES = 10  # passes of the host workload through each process's analysis, after a first one


def _detect_many(chunk: list[np.ndarray]) -> tuple[list[list[ChangePoint]], float, list[float]]:
    """Change points of every series of ``chunk``, the CPU seconds they took, and the host workload's CPU seconds
    between every ``len(chunk) // HOST_SAMPLES`` of them (not counted in the analysis': it samples the host's speed
    through the run, which drifts by 10 % within an hour here)."""
    changes: list[list[ChangePoint]] = []
    cpu, host_seconds = 0.0, [host.workload()[0]]
    every = max(len(chunk) // HOST_SAMPLES, 1)
    for start in range(0, len(chunk), every):
        tick = time.process_time()
        changes += [detect(values) for values in chunk[start:start + every]]
        cpu += time.process_time() - tick
        host_seconds.append(host.workload()[0])
    return changes, cpu, host_seconds


def _series(count: int, points: int) -> list[np.ndarray]:
    """Half ``mixed`` (old generator), half the acceptance kinds in turn; ``points + APPENDS`` commits each."""
    n = points + APPENDS
    out = [s.values for s in generate_cell("mixed", 0.01, count // 2, 0, n=n)]
    per_kind = -(-(count - len(out)) // len(histories.KINDS))
    for kind in histories.KINDS:
        out += [h.values for h in histories.cell(kind, 0.01, per_kind, 0, n=n)]
    return out[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=10_000)
    parser.add_argument("--points", type=int, default=500)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    console = Console()

    with console.status(f"generating {args.series:,} series × {args.points} commits"):
        full = _series(args.series, args.points)
        series = [values[:args.points] for values in full]
    chunks = [series[i::args.jobs] for i in range(args.jobs)]
    start = time.perf_counter()
    with console.status(f"analysing on {args.jobs} process(es)"), ProcessPoolExecutor(args.jobs) as pool:
        parts = list(pool.map(_detect_many, chunks))
    analysis = time.perf_counter() - start
    changes: list[list[ChangePoint]] = [[] for _ in series]
    for i, (part, _cpu, _host) in enumerate(parts):
        changes[i::args.jobs] = part
    cpu = sum(c for _part, c, _host in parts)
    analysis_host = host.slowdown([s for *_, samples in parts for s in samples])
    found = sum(map(len, changes))

    with console.status("reading each series' latest stretch"):
        tick = time.perf_counter()
        watch = Watch(series, changes)
        setup = time.perf_counter() - tick
    times, cpu_times, flagged, searched_before = [], [], 0, watch.searches
    append_host = [host.workload()[0]]
    for step in range(APPENDS):
        new = np.array([values[args.points + step] for values in full])
        tick, cpu_tick = time.perf_counter(), time.process_time()
        flagged += sum(map(len, watch.append(new).values()))
        times.append(time.perf_counter() - tick)
        cpu_times.append(time.process_time() - cpu_tick)
        append_host.append(host.workload()[0])
    commit_host = host.slowdown(append_host)

    searched = (watch.searches - searched_before) / APPENDS
    table = Table("measurement", "value", "goal")
    table.add_row(f"full analysis, {args.series:,} × {args.points}, {args.jobs} process(es)",
                  f"{analysis:.1f} s wall, {cpu / args.jobs:.1f} s CPU per process ({found:,} change points)",
                  "< 60 s")
    table.add_row("per series", f"{cpu / args.series * 1e3:.2f} ms CPU", "")
    table.add_row(f"one new commit on all {args.series:,} series (p50 / max of {APPENDS})",
                  f"{np.median(times):.2f} s / {max(times):.2f} s wall, {np.median(cpu_times):.2f} s / "
                  f"{max(cpu_times):.2f} s CPU ({flagged} new change points)", "< 1 s")
    table.add_row("... series searched again per commit", f"{searched:.1f} ({searched / args.series:.1%})", "")
    table.add_row("watch set-up from the full analysis (once)", f"{setup:.1f} s", "")
    table.add_row("host workload through the analysis / the new commits",
                  f"×{analysis_host:.2f} / ×{commit_host:.2f} the reference host's {host.REFERENCE_MS:.0f} ms CPU", "")
    table.add_row("... full analysis and one new commit (p50), scaled to the reference host",
                  f"{cpu / args.jobs / analysis_host:.1f} s and {np.median(cpu_times) / commit_host:.2f} s CPU",
                  "< 60 s, < 1 s")
    console.print(table)


if __name__ == "__main__":
    main()
