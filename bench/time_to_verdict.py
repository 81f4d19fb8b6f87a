"""What `roofwatch compare` costs when later rounds measure only the benchmarks still undecided.

    python -m bench.time_to_verdict [--benchmarks 100] [--max-rounds 10] [--small 3] [--markdown FILE]

Builds a repository whose commits set every benchmark's time: each benchmark sleeps its own
length (15–25 ms) times a factor drawn once per process (per-process noise, as a GPU kernel's
fast or slow mode, or a CPU's frequency, moves a whole process), and two of them are 5 % slower
on the head. Most benchmarks are quiet (0.2 % per process); a tenth are noisier (1 %), and the
two slower ones 1.5 %, so their verdicts take more rounds. ``roofwatch compare`` runs it end to
end twice on the same host — ``ROOFWATCH_AB_LATER_ROUNDS=all`` (every round runs every benchmark
suite in full) and ``open`` (rounds after the first run only what is undecided) — and the table
compares:

* **benchmark measurements**: how many benchmark × process measurements were taken (host-free);
* **suite seconds**: the wall time of the suite processes, pytest's start-up included (what a GPU
  is held for);
* **end to end**: the whole command;
* **verdicts**: whether every benchmark got the same verdict both ways.

No benchmark can be decided before its third round (``abtest.MIN_ROUNDS``), so the saving is
at most the rounds the slowest verdict takes divided by three: raise ``--max-rounds`` to see a
comparison whose stubborn benchmarks need more rounds. A second table does the same for a
3-benchmark repository, where nothing can be saved and nothing must be lost.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

PYPROJECT = """\
[project]
name = "time-to-verdict"
version = "0.0.1"

[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest bench -q -p no:cacheprovider --benchmark-only --benchmark-min-rounds=5 --benchmark-max-time=0.05 --benchmark-warmup=off"
"""
KERNELS = """\
import os
import random
import time

# One draw per process: the whole process is fast or slow for a benchmark, as a GPU's mode or a
# CPU's clock would make it.
_RNG = random.Random(os.urandom(16))
TIMES = {times!r}
NOISE = {noise!r}
FACTOR = {{name: 1.0 + NOISE[name] * _RNG.gauss(0.0, 1.0) for name in TIMES}}


def work(name):
    time.sleep(TIMES[name] * FACTOR[name])
"""
BENCH = """\
import pytest

from kernels import TIMES, work


@pytest.mark.parametrize("name", sorted(TIMES))
def test_kernel(benchmark, name):
    benchmark(work, name)
"""
QUIET, NOISY, SLOWED = 0.002, 0.01, 0.015


@dataclass(frozen=True)
class Outcome:
    verdicts: dict[str, str]  # benchmark → direction
    rounds: int
    measurements: int
    suite_s: float
    wall_s: float
    verdict: str


def design(count: int) -> tuple[dict[str, float], dict[str, float], list[str]]:
    """Each benchmark's time (s) and per-process noise, and which two are slower on the head."""
    names = [f"k{i:03d}" for i in range(count)]
    times = {name: 0.015 + 0.010 * (i % 11) / 10 for i, name in enumerate(names)}
    slowed = names[1:3] if count > 3 else names[:1]
    noise = {name: SLOWED if name in slowed else NOISY if i % 10 == 5 else QUIET for i, name in enumerate(names)}
    return times, noise, slowed


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", *args], cwd=repo,
                          check=True, capture_output=True, text=True).stdout.strip()


def build(repo: Path, count: int) -> tuple[str, str, list[str]]:
    times, noise, slowed = design(count)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "bench").mkdir()
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "bench" / "test_kernels.py").write_text(BENCH)
    (repo / "kernels.py").write_text(KERNELS.format(times=times, noise=noise))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "kernels")
    base = git(repo, "rev-parse", "HEAD")
    slower = {name: value * (1.05 if name in slowed else 1.0) for name, value in times.items()}
    (repo / "kernels.py").write_text(KERNELS.format(times=slower, noise=noise))
    git(repo, "commit", "-q", "-am", "two kernels 5 % slower")
    return base, git(repo, "rev-parse", "HEAD"), [f"test_kernel[{name}]" for name in slowed]


def compare(repo: Path, base: str, head: str, later_rounds: str, max_rounds: int, work: Path) -> Outcome:
    env = {**os.environ, "ROOFWATCH_DATA_DIR": str(work / "data"),
           "ROOFWATCH_DATABASE_URL": f"sqlite:///{work / 'rw.db'}", "ROOFWATCH_AB_LATER_ROUNDS": later_rounds,
           "ROOFWATCH_AB_MAX_ROUNDS": str(max_rounds), "ROOFWATCH_AB_BUDGET_S": "0", "ROOFWATCH_CALIBRATE": "0",
           "COLUMNS": "200"}
    started = time.monotonic()
    done = subprocess.run([str(Path(sys.executable).parent / "roofwatch"), "compare", base, head, "--repo",
                           str(repo), "--format", "json"], env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    if not done.stdout.strip():
        raise SystemExit(f"compare printed nothing (exit {done.returncode}):\n{done.stderr[-3000:]}")
    report = json.loads(done.stdout)
    rounds_run = _rounds_run(work / "rw.db")
    suites = [suite for process in rounds_run for suite in process["suites"]]
    return Outcome({row["benchmark"]: row["direction"] for row in report["benchmarks"]}, report["rounds"],
                   sum(s["measured"] for s in suites), sum(s["duration_s"] for s in suites), wall, report["verdict"])


def _rounds_run(database: Path) -> list[dict]:
    import sqlite3

    with sqlite3.connect(database) as connection:
        (details,) = connection.execute("SELECT details FROM comparison ORDER BY id DESC LIMIT 1").fetchone()
    return json.loads(details)["rounds_run"]  # type: ignore[no-any-return]


def table(title: str, before: Outcome, after: Outcome, slowed: list[str]) -> tuple[Table, list[str]]:
    same = sum(before.verdicts.get(k) == after.verdicts.get(k) for k in before.verdicts | after.verdicts)
    total = len(before.verdicts | after.verdicts)
    found = {k: (before.verdicts.get(k), after.verdicts.get(k)) for k in slowed}
    rows = [
        ("rounds", str(before.rounds), str(after.rounds), ""),
        ("benchmark measurements", str(before.measurements), str(after.measurements),
         f"{before.measurements / max(after.measurements, 1):.1f}×"),
        ("suite seconds", f"{before.suite_s:.0f}", f"{after.suite_s:.0f}", f"{before.suite_s / max(after.suite_s, 1e-9):.1f}×"),
        ("end to end, s", f"{before.wall_s:.0f}", f"{after.wall_s:.0f}", f"{before.wall_s / max(after.wall_s, 1e-9):.1f}×"),
        ("verdict", before.verdict, after.verdict, ""),
        ("same verdict per benchmark", f"{same} of {total}", "", ""),
        ("the slower ones", ", ".join(str(v[0]) for v in found.values()), ", ".join(str(v[1]) for v in found.values()), ""),
    ]
    out = Table("", "every suite in full", "only what is open", "ratio", title=title)
    for row in rows:
        out.add_row(*row)
    markdown = [f"### {title}", "", "| | every suite in full | only what is open | ratio |", "|---|---:|---:|---:|"]
    markdown += [f"| {' | '.join(row)} |" for row in rows]
    return out, markdown


def measure(count: int, max_rounds: int, console: Console) -> tuple[Table, list[str]]:
    with tempfile.TemporaryDirectory(prefix="roofwatch-ttv-") as folder:
        root = Path(folder)
        base, head, slowed = build(root / "repo", count)
        outcomes = {}
        for mode in ("all", "open"):
            console.print(f"[dim]{count} benchmarks, later rounds measure {mode}: roofwatch compare …[/]")
            work = root / mode
            work.mkdir()
            outcomes[mode] = compare(root / "repo", base, head, mode, max_rounds, work)
    return table(f"{count} benchmarks, 2 of them 5 % slower on the head, at most {max_rounds} rounds"
                 if count > 3 else f"{count} benchmarks, 1 of them 5 % slower, at most {max_rounds} rounds",
                 outcomes["all"], outcomes["open"], [f"test_kernel[{n}]" for n in design(count)[2]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", type=int, default=100)
    parser.add_argument("--small", type=int, default=3, help="benchmarks of the second table (0: none)")
    parser.add_argument("--max-rounds", type=int, default=10)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    console = Console()
    lines: list[str] = []
    for count in [args.benchmarks] + ([args.small] if args.small else []):
        shown, markdown = measure(count, args.max_rounds, console)
        console.print(shown)
        lines += markdown + [""]
    if args.markdown:
        args.markdown.write_text("\n".join(lines))


if __name__ == "__main__":
    main()
