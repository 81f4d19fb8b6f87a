"""Change-point detection benchmark: synthetic benchmark histories (and real labelled series) × detectors.

    python -m bench.changepoints.run [--series-per-cell N] [--seed S] [--detectors a,b,...]
                                     [--jobs J] [--markdown FILE] [--real] [--tolerance T]

Every detector sees the same series (generated once from ``--seed``). Work is spread over
``--jobs`` processes one (detector, series) call at a time because e-divisive is O(n²) per
permutation and dominates the run. A detector whose library is missing is skipped with a note.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench.changepoints import peers, real
from bench.changepoints.generator import FAMILIES, NOISE_LEVELS, Series, clean_fraction, generate_cell
from bench.changepoints.report import SCORE_COLUMNS, SCORE_LEGEND, Table, print_rich, score_cells, to_markdown
from bench.changepoints.score import DEFAULT_TOLERANCE, Score, aggregate, match

Detector = Callable[[np.ndarray], list[int]]


def roofwatch(values: np.ndarray) -> list[int]:
    """roofwatch's own detector: the indexes of the change points it returns."""
    try:
        from roofwatch.service.analysis.changepoints import detect
    except ImportError as exc:
        raise ImportError(f"roofwatch.service.analysis.changepoints is not importable ({exc})") from exc
    return sorted(c.index for c in detect(values))


# One line per detector; the name is what --detectors takes.
DETECTORS: dict[str, Detector] = {
    "asv": peers.asv,
    "otava": peers.otava,
    "edivisive": peers.edivisive,
    "zscore": peers.zscore,
    "pelt": peers.pelt,
    "roofwatch": roofwatch,
}


@dataclass(frozen=True)
class Job:
    """One series to run every detector on; ``key`` names it in the results."""

    key: str
    values: np.ndarray


@dataclass(frozen=True)
class Outcome:
    detections: list[int]
    seconds: float
    error: str | None = None


Results = dict[tuple[str, str], Outcome]


# --- running ----------------------------------------------------------------------------------------

def usable_detectors(names: Sequence[str], console: Console) -> list[str]:
    """The requested detectors that run here: each is tried once on a tiny series, and skipped with a note if not."""
    probe = np.r_[np.full(40, 1e-3), np.full(40, 1.2e-3)] * (1 + 0.01 * np.sin(np.arange(80)))
    usable = []
    for name in names:
        try:
            DETECTORS[name](probe)
        except ImportError as exc:
            console.print(f"[yellow]note:[/] skipping [bold]{name}[/]: {exc}")
            continue
        except Exception as exc:  # a detector that cannot run at all is reported, not fatal
            console.print(f"[yellow]note:[/] skipping [bold]{name}[/]: fails on a probe series: {exc!r}")
            continue
        usable.append(name)
    return usable


def _run_one(task: tuple[str, Job]) -> tuple[str, str, Outcome]:
    name, job = task
    start = time.perf_counter()
    try:
        found = DETECTORS[name](job.values)
    except Exception as exc:  # one bad series must not lose the whole benchmark; it is counted as an error
        return name, job.key, Outcome([], time.perf_counter() - start, f"{type(exc).__name__}: {exc}")
    return name, job.key, Outcome(sorted(found), time.perf_counter() - start)


def _tasks(detectors: Sequence[str], jobs: Sequence[Job]) -> list[tuple[str, Job]]:
    # longest series and the O(n²) detector first, so no worker is left with a straggler at the end
    slow = {"edivisive": 0, "otava": 1, "asv": 2}
    tasks = [(d, j) for j in jobs for d in detectors]
    return sorted(tasks, key=lambda t: (-len(t[1].values), slow.get(t[0], 9)))


def run_all(detectors: Sequence[str], jobs: Sequence[Job], processes: int, console: Console) -> Results:
    tasks = _tasks(detectors, jobs)
    results: Results = {}
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        bar = progress.add_task(f"{len(detectors)} detectors × {len(jobs)} series", total=len(tasks))
        for name, key, outcome in _execute(tasks, processes):
            results[(name, key)] = outcome
            progress.advance(bar)
    return results


def _execute(tasks: list[tuple[str, Job]], processes: int) -> Iterator[tuple[str, str, Outcome]]:
    if processes <= 1:
        yield from map(_run_one, tasks)
        return
    # fork: workers inherit the imported libraries and DETECTORS instead of re-importing them
    with get_context("fork").Pool(processes) as pool:
        yield from pool.imap_unordered(_run_one, tasks, chunksize=1)


# --- synthetic tables ------------------------------------------------------------------------------

def synthetic_jobs(series_per_cell: int, seed: int) -> dict[str, Series]:
    return {
        f"syn/{family}/{noise}/{i}": s
        for family in FAMILIES
        for noise in NOISE_LEVELS
        for i, s in enumerate(generate_cell(family, noise, series_per_cell, seed))
    }


def _score(name: str, keys: Iterable[str], truth: dict[str, list[int]], results: Results,
           tolerance: int) -> tuple[Score, float]:
    keys = list(keys)
    score = aggregate(((results[(name, k)].detections, truth[k]) for k in keys), tolerance)
    return score, sum(results[(name, k)].seconds for k in keys)


def synthetic_tables(series: dict[str, Series], detectors: Sequence[str], results: Results,
                     tolerance: int) -> list[Table]:
    truth = {k: s.changes for k, s in series.items()}

    def keys(family: str | None = None, noise: float | None = None) -> list[str]:
        return [k for k, s in series.items()
                if (family is None or s.family == family) and (noise is None or s.noise == noise)]

    per_cell = Table(f"Synthetic series by family × noise (±{tolerance} commits)",
                     ["family", "noise", "detector", *SCORE_COLUMNS])
    per_family = Table(f"Synthetic series by family, all noise levels (±{tolerance} commits)",
                       ["family", "detector", *SCORE_COLUMNS])
    overall = Table(f"Synthetic series, overall (±{tolerance} commits)", ["detector", *SCORE_COLUMNS])
    for family in FAMILIES:
        for noise in NOISE_LEVELS:
            for i, name in enumerate(detectors):
                cells = score_cells(*_score(name, keys(family, noise), truth, results, tolerance))
                per_cell.add(family, f"{noise:g}", name, *cells, new_section=i == 0)
        for i, name in enumerate(detectors):
            per_family.add(family, name, *score_cells(*_score(name, keys(family), truth, results, tolerance)),
                           new_section=i == 0)
    for name in detectors:
        overall.add(name, *score_cells(*_score(name, keys(), truth, results, tolerance)))
    all_series = list(series.values())
    overall.notes.append(
        f"{len(all_series)} series of {len(all_series[0].values)} commits, "
        f"{clean_fraction(all_series):.0%} change-free; micro-averaged over true changes.")
    overall.notes.append(SCORE_LEGEND)
    return [per_cell, per_family, overall]


# --- real tables ----------------------------------------------------------------------------------------

@dataclass
class RealData:
    talos: list[real.RealSeries]
    tigerbeetle: real.RealSeries
    tcpd: list[real.RealSeries]
    tcpd_skipped: list[str]

    @classmethod
    def load(cls) -> RealData:
        tcpd, skipped = real.tcpd_series()
        return cls(real.talos_series(), real.tigerbeetle_series(), tcpd, skipped)

    def jobs(self) -> list[Job]:
        every = [*self.talos, self.tigerbeetle, *self.tcpd]
        return [Job(f"{s.source}/{s.name}", s.values) for s in every]


def _counts(tp: int, fp: int, fn: int) -> str:
    return f"{tp}/{fp}/{fn}"


def talos_table(data: RealData, detectors: Sequence[str], results: Results, tolerance: int) -> Table:
    table = Table(f"Talos (Perfherder) series: F1 (tp/fp/fn) at ±{tolerance} pushes",
                  ["file", "points", "truth", *detectors])
    truth = {f"talos/{s.name}": s.truth for s in data.talos}
    for s in data.talos:
        cells = []
        for name in detectors:
            tp, fp, fn = match(results[(name, f"talos/{s.name}")].detections, s.truth, tolerance)
            one = aggregate([(results[(name, f"talos/{s.name}")].detections, s.truth)], tolerance)
            cells.append(f"{one.f1:.2f} ({_counts(tp, fp, fn)})")
        table.add(s.name, str(len(s.values)), ",".join(map(str, s.truth)) or "—", *cells)
    pooled = []
    for name in detectors:
        score, _seconds = _score(name, truth, truth, results, tolerance)
        pooled.append(f"{score.f1:.2f} ({_counts(score.tp, score.fp, score.fn)})")
    table.add("pooled", str(sum(len(s.values) for s in data.talos)), str(sum(map(len, truth.values()))), *pooled,
              new_section=True)
    table.add("seconds", "", "", *(f"{sum(results[(n, k)].seconds for k in truth):.1f}" for n in detectors))
    table.notes.append(
        "Truth = the pushes Perfherder's own detector flags in treeherder's test (an algorithm, not a human); "
        "Perfherder asserts exact pushes and has no tolerance of its own, so the synthetic tolerance is used.")
    return table


def tigerbeetle_table(data: RealData, detectors: Sequence[str], results: Results, tolerance: int) -> Table:
    s = data.tigerbeetle
    key = f"otava/{s.name}"
    table = Table(f"Tigerbeetle: detections vs otava's asserted {s.truth} (tp/fp/fn at ±{tolerance})",
                  ["detector", "detections", "tp/fp/fn", "seconds"])
    for name in detectors:
        outcome = results[(name, key)]
        table.add(name, ", ".join(map(str, outcome.detections)) or "—",
                  _counts(*match(outcome.detections, s.truth, tolerance)), f"{outcome.seconds:.2f}")
    table.notes.append(real.TIGERBEETLE_NOTE)
    return table


def tcpd_table(data: RealData, detectors: Sequence[str], results: Results) -> Table:
    f_measure, source = real.tcpd_f_measure()
    table = Table("TCPD: mean F1 (TCPDBench metric)", ["detector", "mean F1", "beats zero", "seconds"])
    zero = [f_measure(s.annotations, [0], margin=real.TCPD_MARGIN) for s in data.tcpd]
    for name in detectors:
        f1 = [f_measure(s.annotations, results[(name, f"tcpd/{s.name}")].detections, margin=real.TCPD_MARGIN)
              for s in data.tcpd]
        better = sum(a > b + 1e-12 for a, b in zip(f1, zero))
        seconds = sum(results[(name, f"tcpd/{s.name}")].seconds for s in data.tcpd)
        table.add(name, f"{np.mean(f1):.3f}", f"{better}/{len(f1)}", f"{seconds:.1f}")
    table.add("zero baseline [0]", f"{np.mean(zero):.3f}", "—", "—", new_section=True)
    table.notes.append(
        f"{len(data.tcpd)} univariate series, all annotators, margin {real.TCPD_MARGIN}; index 0 counts as a change "
        "for every method, so predicting nothing ([0]) already scores. 'beats zero' = series where the detector's F1 "
        "exceeds that baseline's.")
    table.notes.append(f"Metric: {source}.")
    if data.tcpd_skipped:
        table.notes.append(f"Skipped (multivariate): {', '.join(data.tcpd_skipped)}.")
    return table


# --- entry point ---------------------------------------------------------------------------------------

def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.changepoints.run", description=__doc__.split("\n")[0])
    parser.add_argument("--series-per-cell", type=int, default=40, help="series per family × noise level")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--detectors", default=",".join(DETECTORS),
                        help=f"comma-separated, from: {', '.join(DETECTORS)}")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--tolerance", type=int, default=DEFAULT_TOLERANCE, help="± commits for a detection to count")
    parser.add_argument("--markdown", type=Path, help="also write the tables as Markdown to this file")
    parser.add_argument("--real", action="store_true", help="also score the real series of the shared corpus")
    args = parser.parse_args(argv)
    unknown = [d for d in args.detectors.split(",") if d not in DETECTORS]
    if unknown:
        parser.error(f"unknown detector(s) {', '.join(unknown)}; known: {', '.join(DETECTORS)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # piped output: wide tables must not wrap at rich's default of 80
    detectors = usable_detectors([d for d in args.detectors.split(",") if d], console)
    if not detectors:
        console.print("[red]no detector can run[/]")
        return 2
    started = time.perf_counter()
    series = synthetic_jobs(args.series_per_cell, args.seed)
    jobs = [Job(k, s.values) for k, s in series.items()]
    data = RealData.load() if args.real else None
    if data is not None:
        jobs += data.jobs()
    results = run_all(detectors, jobs, args.jobs, console)

    tables = synthetic_tables(series, detectors, results, args.tolerance)
    if data is not None:
        tables += [talos_table(data, detectors, results, args.tolerance),
                   tigerbeetle_table(data, detectors, results, args.tolerance),
                   tcpd_table(data, detectors, results)]
    for table in tables:
        print_rich(console, table)
    errors = [(n, k, o.error) for (n, k), o in results.items() if o.error]
    for name, key, error in errors[:20]:
        console.print(f"[red]error:[/] {name} on {key}: {error} (scored as no detections)")
    elapsed = time.perf_counter() - started
    console.print(f"{len(jobs)} series × {len(detectors)} detectors in {elapsed:.0f} s with {args.jobs} processes "
                  f"(seed {args.seed}); {len(errors)} errors")
    if args.markdown:
        header = (f"Change-point benchmark: seed {args.seed}, {args.series_per_cell} series per cell, "
                  f"detectors {', '.join(detectors)}, {elapsed:.0f} s.\n\n")
        args.markdown.write_text(header + "\n".join(to_markdown(t) for t in tables))
        console.print(f"Markdown written to {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
