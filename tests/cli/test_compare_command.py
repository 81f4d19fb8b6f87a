"""`roofwatch compare`: interleaved A/B on this machine, verdicts a CI step can gate on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.planted_repo import build_planted_history
from support.sample_repo import commit, init
from support.tests_support import roofwatch

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

QUICK_PYPROJECT = """\
[project]
name = "quick"
version = "0.0.1"

[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest bench -q -p no:cacheprovider --benchmark-only --benchmark-min-rounds=10 --benchmark-max-time=0.02 --benchmark-warmup=off"
"""

QUICK_BENCH = """\
def work(n):
    return sum(i * i for i in range(n))


def test_work(benchmark):
    benchmark(work, 3000)


def test_more_work(benchmark):
    benchmark(work, 9000)
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_DATABASE_URL": f"sqlite:///{tmp_path}/rw.db"}


@pytest.mark.parametrize("attempt", range(10))
def test_identical_code_is_never_called_a_change_ten_times_out_of_ten(tmp_path: Path, env: dict[str, str],
                                                                      attempt: int) -> None:
    """Ten separate comparisons of commits that differ only in words: none may cry wolf.

    Ten cases rather than one loop, so the workers share them; each is a fresh process on real
    timings of this busy host, as a user's ten CI runs would be. Tiny pure-Python benchmarks
    vary 5–25 % between processes here, so within the 3–10 rounds a comparison may run they
    cannot always be shown to lie within ±2 %: "inconclusive" (exit 3) is then the honest answer,
    and never a change.
    """
    repo = tmp_path / "quick"
    init(repo)
    base = commit(repo, "Add work", {"pyproject.toml": QUICK_PYPROJECT, "bench/test_work.py": QUICK_BENCH}, 1)
    head = commit(repo, "Document work", {"README.md": "Only words changed.\n"}, 2)
    done = roofwatch(["compare", base, head, "--repo", str(repo), "--format", "json"], env, check=False)
    data = json.loads(done.stdout)
    assert (done.returncode, data["verdict"]) in ((0, "no-change"), (3, "inconclusive")), data
    # A move of the identical code (estimate beyond min_effect) is an interaction, never a change.
    assert all(row["direction"] in ("none", "inconclusive", "interaction") for row in data["benchmarks"]), data


def test_a_planted_slowdown_and_a_correctness_bug_fail_the_comparison(tmp_path: Path, env: dict[str, str]) -> None:
    repo = tmp_path / "planted"
    shas = build_planted_history(repo)
    done = roofwatch(["compare", shas["refactor"], shas["bug"], "--repo", str(repo), "--format", "json"], env,
                     check=False)
    data = json.loads(done.stdout)
    assert done.returncode == 1 and data["verdict"] == "failure", data
    assert [f["test_id"] for f in data["new_failures"]] == ["checks.test_kernels::test_softmax"]

    done = roofwatch(["compare", shas["docs"], shas["slow"], "--repo", str(repo)], env, check=False)
    assert done.returncode == 1, done.stdout
    assert "regression" in done.stdout and "test_rmsnorm" in done.stdout
    assert "smallest detectable change" in done.stdout


def test_unknown_revisions_are_a_clear_error(tmp_path: Path, env: dict[str, str]) -> None:
    repo = tmp_path / "planted"
    build_planted_history(repo)
    done = roofwatch(["compare", "main", "no-such-branch", "--repo", str(repo)], env, check=False)
    assert done.returncode == 2 and "unknown revision 'no-such-branch'" in done.stdout


CRASHING_BENCH = """\
import sys

def test_work(benchmark):
    sys.stderr.write("CUDA error: an illegal memory access was encountered\\n")
    raise SystemExit(3)
"""


def test_a_suite_that_does_not_finish_is_explained_in_the_terminal(tmp_path: Path, env: dict[str, str]) -> None:
    """Which suite, on which side, why, and its last lines: printed, not left in the database."""
    repo = tmp_path / "crash"
    init(repo)
    base = commit(repo, "Add work", {"pyproject.toml": QUICK_PYPROJECT, "bench/test_work.py": QUICK_BENCH}, 1)
    head = commit(repo, "Break work", {"bench/test_work.py": CRASHING_BENCH}, 2)
    done = roofwatch(["compare", base, head, "--repo", str(repo)], env, check=False)
    assert done.returncode != 0
    out = " ".join(done.stdout.split())
    assert "suites did not finish: benchmarks" in out
    assert "verdict: no-change" not in out  # never for what a crashed head left unmeasured
    assert "head benchmarks:" in out and "CUDA error: an illegal memory access was encountered" in out
    data = json.loads(roofwatch(["compare", base, head, "--repo", str(repo), "--format", "json"], env,
                                check=False).stdout)
    assert "CUDA error: an illegal memory access" in data["error"]
