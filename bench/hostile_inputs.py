"""What small hostile inputs cost: redaction, a long query string beside another client, and result
files of many benchmarks or one long string.

    python -m bench.hostile_inputs [--part redaction|server|parser|run|all] [--markdown FILE]

Four tables, each printed as it is measured (``--markdown`` also writes them to FILE):

1. **redaction**: seconds to redact texts of 128 KiB to 1 MiB shaped to make a pattern retry from
   every character (a run of letters, ``a://`` repeated, ``x://`` then ``a:`` repeated, a log
   line repeated), and the previous URL pattern on letters up to 32 KiB for comparison. Linear
   time shows as a constant µs per KiB along each row.
2. **server**: a real ``roofwatch serve`` (its own process, SQLite); one client sends
   ``GET /healthz?q=<120,000 letters>``, another ``GET /api/runs`` right after; the seconds each
   waited, per trial, beside ``GET /api/runs`` alone.
3. **parser**: ``parse_benchmark_json`` on pytest-benchmark files of 1,000 to 1,000,000 tiny
   benchmarks (strict JSON, and with a NaN in each), and of one benchmark whose name is 4 MB to
   400 MB long, each in a fresh process: seconds, peak resident memory, and the outcome. Past
   ``ROOFWATCH_MAX_BENCHMARKS`` (10,000) the file is refused at the 10,001st benchmark, so peak
   memory stays where it was at the limit.
4. **run**: ``roofwatch run`` (embedded, SQLite, in the sandbox) of a suite that writes 10,000 or
   1,000,000 tiny benchmarks: seconds, the peak resident memory of the ``roofwatch run`` process,
   and what became of the suite.
"""

from __future__ import annotations

import argparse
import multiprocessing
import re
import resource
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
KIB, MIB = 1024, 1024 * 1024
REDACTION_SIZES = (128 * KIB, 256 * KIB, 512 * KIB, 1 * MIB)
PREVIOUS_SIZES = (8 * KIB, 16 * KIB, 32 * KIB)
# The URL pattern before its scheme was anchored to the start of a run and taken possessively.
PREVIOUS_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")
QUERY_LETTERS = 120_000
TRIALS = 5
COUNTS = (1_000, 10_000, 100_000, 1_000_000)
STRING_MB = (4, 32, 400)

SHAPES: dict[str, Callable[[int], str]] = {
    "letters": lambda n: "a" * n,
    "a:// repeated": lambda n: "a://" * (n // 4),
    "x:// then a: repeated": lambda n: "x://" + "a:" * ((n - 4) // 2),
    "access-log lines": lambda n: ('127.0.0.1:5123 - "GET /api/runs?repo=acme/kernels HTTP/1.1" 200\n'
                                   * (n // 66 + 1))[:n],
}

console = Console()
markdown: list[str] = []


def show(table: Table, title: str, note: str) -> None:
    console.print(table)
    columns = [str(column.header) for column in table.columns]
    rows = [[str(cell) for cell in column.cells] for column in table.columns]
    markdown.extend([f"**{title}**", "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)])
    markdown.extend("| " + " | ".join(row) + " |" for row in zip(*rows))
    markdown.extend(["", note, ""])


def seconds(action: Callable[[], object], repeat: int = 5) -> float:
    """The fastest of ``repeat`` runs: the cost of the work, not of what else this host was doing."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best


# -- 1. redaction ---------------------------------------------------------------------------------

def redaction_table() -> None:
    from roofwatch.common.redaction import redact

    table = Table("shape", *(f"{size // KIB} KiB" for size in REDACTION_SIZES))
    for name, make in SHAPES.items():
        costs = [seconds(partial(redact, make(size))) for size in REDACTION_SIZES]
        table.add_row(name, *(f"{cost * 1e3:.0f} ms · {1e6 * cost / (size / KIB):.0f} µs/KiB"
                              for cost, size in zip(costs, REDACTION_SIZES)))
    previous = [seconds(partial(PREVIOUS_URL_USERINFO.sub, "***", "a" * size), repeat=1) for size in PREVIOUS_SIZES]
    table.add_row("letters, previous URL pattern",
                  *(f"{size // KIB} KiB: {cost:.2f} s · {1e6 * cost / (size / KIB):.0f} µs/KiB"
                    for cost, size in zip(previous, PREVIOUS_SIZES)), "")
    show(table, "Redaction of one text (best of 5): milliseconds, and µs per KiB",
         "µs per KiB stays flat as the text doubles: linear. The previous URL pattern's row is on smaller "
         "texts (8, 16, 32 KiB): its µs per KiB doubles with the length, its time grows with the square.")


# -- 2. a long query string beside another client --------------------------------------------------

def raw_get(host: str, port: int, target: str) -> tuple[int, float]:
    started = time.perf_counter()
    with socket.create_connection((host, port), timeout=300) as connection:
        connection.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        status = int(connection.recv(64).split(b" ")[1])
    return status, time.perf_counter() - started


def server_table() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from support.served import roofwatch_serving

    with tempfile.TemporaryDirectory(prefix="roofwatch-bench-") as scratch:
        env = {"ROOFWATCH_DATA_DIR": str(Path(scratch) / "data")}
        with roofwatch_serving(env, Path(scratch) / "serve.log") as url:
            host, port = url.removeprefix("http://").split(":")
            alone = [raw_get(host, int(port), "/api/runs")[1] for _ in range(TRIALS)]
            table = Table("trial", f"GET /healthz?q=<{QUERY_LETTERS:,} letters>", "GET /api/runs sent 5 ms later",
                          "GET /api/runs alone (median)")
            for trial in range(1, TRIALS + 1):
                results: dict[str, tuple[int, float]] = {}
                long_one = threading.Thread(target=lambda: results.__setitem__(
                    "long", raw_get(host, int(port), "/healthz?q=" + "a" * QUERY_LETTERS)))
                long_one.start()
                time.sleep(0.005)
                results["other"] = raw_get(host, int(port), "/api/runs")
                long_one.join()
                (long_status, long_s), (other_status, other_s) = results["long"], results["other"]
                table.add_row(str(trial), f"{long_status} in {long_s * 1e3:.0f} ms",
                              f"{other_status} in {other_s * 1e3:.0f} ms", f"{statistics.median(alone) * 1e3:.0f} ms")
        # Loopback delivers about 120,000 bytes in one read; h11 answers a longer request line 400.
    show(table, "A long query string and another client, real `roofwatch serve` (SQLite)",
         "Each request line is written to the access log, redacted, in the server's event loop.")


# -- 3. result files ---------------------------------------------------------------------------------

def first_clause(reason: str) -> str:
    """A refusal's what, without its how-to: "benchmark JSON holds more than 10,000 benchmarks"."""
    return reason.split(" (")[0].split(", the most")[0].split(";")[0]


def write_tiny(path: Path, count: int, nan: bool) -> None:
    median = "NaN" if nan else "0.001"
    with path.open("w") as out:
        out.write('{"machine_info": {}, "benchmarks": [')
        for index in range(count):
            out.write(("," if index else "") + f'{{"name": "b{index}", "stats": {{"median": 0.001, "mean": 0.001, '
                      f'"data": [0.001, {median}]}}}}')
        out.write("]}")


def write_long_name(path: Path, megabytes: int) -> None:
    with path.open("wb") as out:
        out.write(b'{"benchmarks": [{"name": "test_')
        for _ in range(megabytes):
            out.write(b"a" * MIB)
        out.write(b'", "stats": {"median": 0.001, "mean": 0.001}}]}')


def parse_in_child(path: str) -> dict[str, Any]:
    from roofwatch.common.errors import ResultFileError
    from roofwatch.result_files.suite_results import parse_benchmark_json

    started = time.perf_counter()
    try:
        outcome = f"{len(parse_benchmark_json(Path(path)))} measurements"
    except ResultFileError as exc:
        outcome = f"refused: {first_clause(str(exc))}"
    return {"seconds": time.perf_counter() - started, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "outcome": outcome}


def in_child(path: Path) -> dict[str, Any]:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(parse_in_child, (str(path),))  # type: ignore[no-any-return]


def parser_table() -> None:
    table = Table("file", "size", "s", "peak RSS", "outcome")
    with tempfile.TemporaryDirectory(prefix="roofwatch-bench-") as scratch:
        path = Path(scratch) / "benchmark.json"
        cases: list[tuple[str, Callable[[], None]]] = [
            *((f"{count:,} tiny benchmarks", lambda count=count: write_tiny(path, count, False)) for count in COUNTS),
            *((f"{count:,} tiny benchmarks, NaN in each", lambda count=count: write_tiny(path, count, True))
              for count in COUNTS),
            *((f"one name of {mb} MB", lambda mb=mb: write_long_name(path, mb)) for mb in STRING_MB),
        ]
        for label, write in cases:
            write()
            measured = in_child(path)
            table.add_row(label, f"{path.stat().st_size / 1e6:.1f} MB", f"{measured['seconds']:.2f}",
                          f"{measured['peak_mb']:.0f} MB", measured["outcome"])
            path.unlink()
    show(table, "Benchmark JSON, each file read in a fresh process",
         "Peak RSS includes the interpreter and roofwatch's imports (about 50 MB: the one-name rows).")


RUN_COUNTS = (10_000, 1_000_000)
TINY = '{"name": "b%d", "stats": {"median": 0.001, "mean": 0.001, "data": [0.001]}}'
SUITE = f"""\
import sys
target = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--benchmark-json="))
count = int(sys.argv[1])
with open(target, "w") as out:
    out.write('{{"benchmarks": [' + ",".join({TINY!r} % i for i in range(count)) + "]}}")
"""


def peak_of(argv: list[str], env: dict[str, str]) -> tuple[int, float, float]:
    """Run ``argv``; its exit code, seconds and peak resident memory in MB (VmHWM, read until it exits)."""
    import subprocess

    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak_kb = 0
    status = Path(f"/proc/{process.pid}/status")
    while process.poll() is None:
        try:
            peak_kb = max(peak_kb, next(int(line.split()[1]) for line in status.read_text().splitlines()
                                        if line.startswith("VmHWM:")))
        except (OSError, StopIteration, ValueError):
            pass
        time.sleep(0.02)
    return process.returncode, time.perf_counter() - started, peak_kb / 1024


def run_table() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    import sqlite3

    from support.sample_repo import commit, init
    from support.tests_support import ROOFWATCH, child_env

    table = Table("suite writes", "file", "`roofwatch run` s", "peak RSS of `roofwatch run`", "suite")
    for count in RUN_COUNTS:
        with tempfile.TemporaryDirectory(prefix="roofwatch-bench-") as scratch:
            repo, data = Path(scratch) / "repo", Path(scratch) / "data"
            init(repo)
            commit(repo, "Tiny benchmarks", {"write.py": SUITE, "pyproject.toml": (
                f'[[tool.roofwatch.suites]]\nname = "tiny"\nkind = "benchmark"\n'
                f'command = "python write.py {count}"\n')}, 1)
            env = child_env({"ROOFWATCH_DATA_DIR": str(data), "ROOFWATCH_CALIBRATE": "0"})
            code, spent, peak = peak_of([str(ROOFWATCH), "run", "--repo", str(repo)], env)
            with sqlite3.connect(data / "roofwatch.db") as db:
                status, reason = db.execute("SELECT status, reason FROM suiteexecution").fetchone()
            size = sum(len(TINY % i) + 1 for i in range(count))
            table.add_row(f"{count:,} tiny benchmarks", f"{size / 1e6:.1f} MB", f"{spent:.1f}", f"{peak:.0f} MB",
                          f"{status}: {first_clause(reason)}" if reason else f"{status} (exit {code})")
    show(table, "`roofwatch run` of a suite whose result file holds many benchmarks (embedded, SQLite)",
         "The peak is the `roofwatch run` process's own (the suite runs in its own process).")


PARTS = {"redaction": redaction_table, "server": server_table, "parser": parser_table, "run": run_table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=[*PARTS, "all"], default="all")
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    for name, part in PARTS.items():
        if args.part in (name, "all"):
            part()
    if args.markdown:
        args.markdown.write_text("\n".join(markdown))


if __name__ == "__main__":
    main()
