"""Build a small kernel-like git repository with plain pytest + pytest-benchmark suites."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

PYPROJECT = """\
[project]
name = "sample-kernels"
version = "0.0.1"

[[tool.roofwatch.suites]]
name = "correctness"
kind = "correctness"
command = "python -m pytest checks -q -p no:cacheprovider"
timeout = 120

[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest bench -q -p no:cacheprovider --benchmark-only --benchmark-min-rounds=15 --benchmark-max-time=0.05 --benchmark-warmup=off"
timeout = 120
"""

GOOD_KERNEL = """\
def saxpy(a, xs, ys):
    return [a * x + y for x, y in zip(xs, ys)]


def busy(n):
    total = 0
    for i in range(n):
        total += i * i
    return total
"""

CHECKS = """\
from kernel import saxpy


def test_saxpy_small(record_property):
    out = saxpy(2.0, [1.0, 2.0], [3.0, 4.0])
    err = max(abs(o - e) for o, e in zip(out, [5.0, 8.0]))
    record_property("max_abs_err", err)
    assert err == 0


def test_saxpy_empty():
    assert saxpy(1.0, [], []) == []
"""

BENCH = """\
from kernel import busy, saxpy

N = 20000


def test_busy(benchmark):
    benchmark.extra_info.update(flops=2 * N, bytes=8 * N, dtype="fp64", shape=str(N))
    benchmark(busy, N)


def test_saxpy(benchmark):
    xs = [float(i) for i in range(2000)]
    benchmark.extra_info.update(flops=2 * 2000, bytes=24 * 2000, dtype="fp64", shape="2000")
    benchmark(saxpy, 3.0, xs, xs)
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=Kernel Dev", "-c", "user.email=dev@example.com", *args],
        cwd=repo, check=True, capture_output=True, text=True,
    ).stdout.strip()


def write(repo: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(content))


def commit(repo: Path, message: str, files: dict[str, str], when: int) -> str:
    """Commit ``files`` with a fixed date (seconds after the epoch base) so order is stable."""
    write(repo, files)
    git(repo, "add", "-A")
    stamp = f"{1_700_000_000 + when * 60} +0000"
    subprocess.run(
        ["git", "-c", "user.name=Kernel Dev", "-c", "user.email=dev@example.com",
         "commit", "-q", "-m", message],
        cwd=repo, check=True, env={"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp,
                                   "PATH": "/usr/bin:/bin:/usr/local/bin"},
    )
    return git(repo, "rev-parse", "HEAD")


def init(repo: Path) -> None:
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")


def build_history(repo: Path) -> dict[str, str]:
    """good → broken correctness → fixed; returns the SHAs by name."""
    init(repo)
    shas = {}
    shas["good"] = commit(repo, "Add saxpy kernel", {
        "pyproject.toml": PYPROJECT, "kernel.py": GOOD_KERNEL,
        "checks/test_kernel.py": CHECKS, "bench/test_bench.py": BENCH,
    }, 1)
    shas["broken"] = commit(repo, "Fuse saxpy (wrong sign)", {
        "kernel.py": GOOD_KERNEL.replace("a * x + y", "a * x - y"),
    }, 2)
    shas["fixed"] = commit(repo, "Fix saxpy sign", {"kernel.py": GOOD_KERNEL}, 3)
    return shas
