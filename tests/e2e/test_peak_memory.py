"""A kernel repository whose commit doubles a buffer: `roofwatch compare` reports a peak-memory regression.

The kernel scales its input into a scratch buffer it allocates on every call; the head's commit
allocates the buffer twice as large and changes nothing else, so its time moves by what a larger
``np.empty`` costs (nothing a verdict could rely on) while its peak doubles. The suite times it with
``kernel_benchmark``, which records each call's peak (``tracemalloc`` on this CPU-only host); roofwatch
tracks the peak as ``benchmarks:memory::test_scale`` in bytes and decides it like a time.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.sample_repo import commit, init
from support.tests_support import roofwatch

MIB = 2**20

PYPROJECT = """\
[project]
name = "scratchy"
version = "0.0.1"

[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest bench -q -p no:cacheprovider --benchmark-only"
"""
# Fewer samples than the host timer's defaults: the time is not what this repository is about.
CONFTEST = """\
import pytest

from roofwatch.timing import HostTimer, StoppingRule, WarmUp


@pytest.fixture(scope="session")
def kernel_timer():
    return HostTimer(rule=StoppingRule(min_samples=10, max_samples=50, max_time_s=0.1),
                     warmup=WarmUp(time_s=0.02, max_calls=10))
"""
KERNELS = """\
import numpy as np

SCRATCH = {scratch}  # elements of the scratch buffer, per element of input


def scale(x, factor):
    scratch = np.empty(SCRATCH * x.size)
    np.multiply(x, factor, out=scratch[: x.size])
    return float(scratch[0])
"""
BENCH = """\
import numpy as np

from kernels import scale

X = np.random.default_rng(0).random(2 * 2**20 // 8)  # 2 MiB of input, allocated once


def test_scale(kernel_benchmark):
    kernel_benchmark(lambda: scale(X, 3.0), flops=X.size, bytes=16 * X.size, dtype="fp64", shape=str(X.size),
                     impl="numpy")
"""


def test_a_commit_that_doubles_a_buffer_is_a_peak_memory_regression(tmp_path: Path) -> None:
    repo = tmp_path / "scratchy"
    init(repo)
    base = commit(repo, "scale through a scratch buffer", {
        "pyproject.toml": PYPROJECT, "bench/conftest.py": CONFTEST, "bench/test_scale.py": BENCH,
        "kernels.py": KERNELS.format(scratch=1)}, 1)
    head = commit(repo, "double the scratch buffer", {"kernels.py": KERNELS.format(scratch=2)}, 2)
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'rw.db'}",
           "ROOFWATCH_AB_MIN_ROUNDS": "3", "ROOFWATCH_AB_MAX_ROUNDS": "6"}
    done = roofwatch(["compare", base, head, "--repo", str(repo), "--format", "json"], env, check=False)
    report = json.loads(done.stdout)
    rows = {(row["suite"], row["benchmark"]): row for row in report["benchmarks"]}
    memory = rows[("benchmarks:memory", "test_scale")]
    assert memory["direction"] == "regression" and memory["unit"] == "B", memory
    # 2 MiB of scratch became 4 MiB: the peak doubles, give or take the interpreter's few hundred bytes
    assert 2 * MIB <= memory["base_median"] < 2 * MIB + 64 * 1024, memory
    assert 4 * MIB <= memory["head_median"] < 4 * MIB + 64 * 1024, memory
    assert 95 < memory["change_pct"] < 105 and memory["threshold_pct"] == 5.0, memory
    # decided once it holds without its most extreme round (the fourth); a later round the time still
    # needs measures it again in the same process
    assert 4 <= memory["rounds"] <= 6, memory
    assert report["verdict"] == "regression" and done.returncode == 1, report
    # the time series is its own benchmark, never confused with the memory one
    assert rows[("benchmarks", "test_scale")]["unit"] == "s"

    # ... and the terminal prints the sizes as sizes
    table = roofwatch(["compare", base, head, "--repo", str(repo)], env, check=False)
    assert "2.00 MiB" in table.stdout and "4.00 MiB" in table.stdout, table.stdout
