"""Pull-request verdicts from uploaded results, replayed on real H200 processes.

    python -m bench.upload_verdicts [--corpus FILE] [--markdown FILE]

An upload compares two single CI runs, the base's and the head's, each one process
(``service/analysis/single_runs.py``), against a threshold widened by the run-to-run spread of
the series' history. ``../shared/corpus/gpu-h200/rmsnorm-ab-rounds.tgz`` holds sixteen fresh
processes of six Triton rmsnorm benchmarks on one H200: eight of ``main`` and eight of a branch
whose two 8192x8192 kernels run with 4 warps instead of 16 (slower), the other four unchanged.
Every ordered pair of processes is replayed as an upload, the history being ``main``'s other
runs (the head's own left out, as a pull request's head has none):

* ``main`` against ``main``: identical code, so any verdict is a false one;
* ``main`` against the branch: a regression is right for the two 8192x8192 kernels, any verdict
  wrong for the others.

It prints, per benchmark, the verdicts and the thresholds they were judged at, and how many
uploads would have shown a false verdict on some benchmark (a change called where there is none,
or "none" where the branch is slower: a check gone green on a slowdown). *Inconclusive* is no
false verdict: the upload says it cannot tell.
"""

from __future__ import annotations

import argparse
import io
import json
import tarfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from roofwatch.service.analysis import compare, single_runs

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "gpu-h200" / "rmsnorm-ab-rounds.tgz"
CHANGED = "8192x8192"  # the kernels the branch slows
DIRECTIONS = ("regression", "improvement", "inconclusive", "none")


@dataclass(frozen=True)
class Process:
    side: str  # "main" or "fw" (fewer warps)
    index: int
    samples: dict[str, list[float]]  # benchmark -> raw samples in seconds, in the order taken


def load(path: Path) -> list[Process]:
    """Every process of the corpus archive (``raw/{main,fw}-{1..8}.json``, pytest-benchmark JSON)."""
    processes = []
    with tarfile.open(path) as archive:
        for member in archive.getmembers():
            name = Path(member.name).name
            if not member.isfile() or not name.endswith(".json"):
                continue
            side, _, index = name.removesuffix(".json").partition("-")
            handle = archive.extractfile(member)
            if handle is None:
                continue
            data = json.load(io.TextIOWrapper(handle, encoding="utf-8"))
            samples = {b["name"]: [float(s) for s in b["extra_info"]["raw_samples"]] for b in data["benchmarks"]}
            processes.append(Process(side, int(index), samples))
    return sorted(processes, key=lambda p: (p.side, p.index))


def expected(arm: str, name: str) -> str:
    """The right verdict of one upload of ``arm`` on benchmark ``name``."""
    return "regression" if arm != "main vs main" and CHANGED in name else "none"


@dataclass
class Tally:
    verdicts: Counter[str]
    thresholds: list[float]


def replay(processes: list[Process]) -> tuple[dict[tuple[str, str], Tally], dict[str, tuple[int, int]]]:
    """Verdicts per (arm, benchmark), and per arm how many uploads showed a false verdict, of how many."""
    main = [p for p in processes if p.side == "main"]
    branch = [p for p in processes if p.side == "fw"]
    names = sorted(main[0].samples)
    tallies: dict[tuple[str, str], Tally] = {}
    uploads: dict[str, tuple[int, int]] = {}
    medians = {(p.side, p.index, name): float(np.median(p.samples[name])) for p in processes for name in names}
    for arm, heads in (("main vs main", main), ("main vs fewer warps", branch)):
        false_uploads = total = 0
        for head in heads:
            # the history an upload of this head is judged against: main's runs but the head's own
            noise = {name: compare.run_to_run_noise([medians[(p.side, p.index, name)] for p in main if p is not head])
                     for name in names}
            for base in main:
                if head is base:
                    continue
                total += 1
                wrong = False
                for name in names:
                    verdict = single_runs.verdict(
                        base.samples[name], head.samples[name], medians[(base.side, base.index, name)],
                        medians[(head.side, head.index, name)], run_noise=noise[name])
                    tally = tallies.setdefault((arm, name), Tally(Counter(), []))
                    tally.verdicts[verdict.direction] += 1
                    tally.thresholds.append(verdict.threshold_pct)
                    wrong |= verdict.direction not in (expected(arm, name), "inconclusive")
                false_uploads += wrong
        uploads[arm] = (false_uploads, total)
    return tallies, uploads


def _short(name: str) -> str:
    return name.removeprefix("test_rmsnorm[").removesuffix("]")


def table(tallies: dict[tuple[str, str], Tally]) -> Table:
    out = Table(title="Uploads of single H200 processes: verdicts per benchmark (ordered pairs of processes)")
    for column in ("arm", "benchmark", "expected", *DIRECTIONS, "threshold (median)"):
        out.add_column(column, justify="right" if column not in ("arm", "benchmark", "expected") else "left")
    for (arm, name), tally in tallies.items():
        out.add_row(arm, _short(name), expected(arm, name),
                    *(str(tally.verdicts[d]) for d in DIRECTIONS),
                    f"±{np.median(tally.thresholds):.1f} %")
    return out


def markdown(tallies: dict[tuple[str, str], Tally], uploads: dict[str, tuple[int, int]]) -> str:
    lines = [f"| arm | benchmark | expected | {' | '.join(DIRECTIONS)} | threshold (median) |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for (arm, name), tally in tallies.items():
        lines.append(f"| {arm} | {_short(name)} | {expected(arm, name)} | "
                     + " | ".join(str(tally.verdicts[d]) for d in DIRECTIONS)
                     + f" | ±{np.median(tally.thresholds):.1f} % |")
    lines += ["", *(f"- {arm}: {bad} of {total} uploads show a false verdict on some benchmark"
                    for arm, (bad, total) in uploads.items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.upload_verdicts", description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the H200 rounds archive")
    parser.add_argument("--markdown", type=Path, help="also write the table as Markdown here")
    args = parser.parse_args(argv)
    if not args.corpus.is_file():
        parser.error(f"{args.corpus} not found: the corpus lives in ../shared beside the checkout")
    tallies, uploads = replay(load(args.corpus))
    console = Console(width=160)
    console.print(table(tallies))
    for arm, (bad, total) in uploads.items():
        console.print(f"{arm}: {bad} of {total} uploads show a false verdict on some benchmark")
    if args.markdown:
        args.markdown.write_text(markdown(tallies, uploads))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
