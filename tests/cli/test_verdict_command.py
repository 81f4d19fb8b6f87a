"""``roofwatch verdict`` on result files: the real H200 rounds, exit codes, bad input.

The replay is the acceptance test of the GPU statistic and the decision rule on real noise:
sixteen fresh processes of roofwatch's own RMSNorm benchmarks on an NVIDIA H200, round i =
``main-i`` then ``fw-i`` (``fewer-warps``: the fused 8192-column kernels launched with 4 warps
instead of 16; see the corpus README). Whatever the number of rounds the A/B had reached, the
two 8192 × 8192 benchmarks are never "no change", the four identical-code ones are never a
regression, and at the end the quiet 4096 × 16384 pair is "no change" at min_effect 2 %.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from support.tests_support import roofwatch

SLOWER = {"test_rmsnorm[forward-triton-8192x8192-bf16]", "test_rmsnorm[backward-triton-8192x8192-bf16]"}
QUIET = {"test_rmsnorm[forward-triton-4096x16384-bf16]", "test_rmsnorm[backward-triton-4096x16384-bf16]"}
IDENTICAL = QUIET | {"test_rmsnorm[forward-triton-16384x4096-bf16]", "test_rmsnorm[backward-triton-16384x4096-bf16]"}


@pytest.fixture
def h200_rounds(shared_corpus: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "h200"
    with tarfile.open(shared_corpus / "gpu-h200" / "rmsnorm-ab-rounds.tgz") as archive:
        archive.extractall(folder, filter="data")
    return folder / "raw"


def verdict(base: list[Path], head: list[Path], *extra: str) -> tuple[int, dict[str, dict[str, object]]]:
    done = roofwatch(["verdict", "--format", "json", *extra, "--base", *map(str, base), "--head", *map(str, head)],
                     {}, check=False)
    assert done.returncode != 2, done.stdout + done.stderr
    data = json.loads(done.stdout)
    return done.returncode, {row["benchmark"]: row for row in data["benchmarks"]}


@pytest.mark.parametrize("rounds", range(3, 9))
def test_the_h200_replay_never_calls_the_slowdown_no_change_nor_identical_code_a_regression(
        h200_rounds: Path, rounds: int) -> None:
    base = [h200_rounds / f"main-{i}.json" for i in range(1, rounds + 1)]
    head = [h200_rounds / f"fw-{i}.json" for i in range(1, rounds + 1)]
    code, rows = verdict(base, head)
    assert set(rows) == SLOWER | IDENTICAL
    for name in SLOWER:
        assert rows[name]["direction"] in ("regression", "inconclusive"), rows[name]
    for name in IDENTICAL:
        assert rows[name]["direction"] != "regression", rows[name]
    assert code in (1, 3)  # never a green "no regression" while the slowdown is undecided
    if rounds == 8:
        for name in QUIET:
            assert rows[name]["direction"] == "none", rows[name]


BENCH = {"machine_info": {}, "commit_info": {}, "version": "4.0.0", "datetime": "2026-11-26T00:00:00"}


def pytest_benchmark_file(path: Path, seconds: dict[str, float]) -> Path:
    entries = [{"name": name, "fullname": name, "group": None, "params": None, "param": None, "extra_info": {},
                "options": {}, "stats": {"min": t, "max": t, "mean": t, "stddev": 0.0, "rounds": 5, "median": t,
                                         "iqr": 0.0, "q1": t, "q3": t, "data": [t] * 5}}
               for name, t in seconds.items()]
    path.write_text(json.dumps({**BENCH, "benchmarks": entries}))
    return path


@pytest.mark.parametrize(("head_factor", "min_effect", "code", "direction"), [
    (2.0, "2%", 1, "regression"),
    (1.0, "2%", 0, "none"),
    (0.5, "2%", 0, "improvement"),
    (1.05, "10%", 0, "none"),
])
def test_exit_codes_follow_the_verdict(tmp_path: Path, head_factor: float, min_effect: str, code: int,
                                       direction: str) -> None:
    jitter = [1.0, 1.002, 0.999, 1.001, 0.998]
    base = [pytest_benchmark_file(tmp_path / f"b{i}.json", {"test_k": 1e-3 * j}) for i, j in enumerate(jitter)]
    head = [pytest_benchmark_file(tmp_path / f"h{i}.json", {"test_k": head_factor * 1e-3 * j})
            for i, j in enumerate(jitter[::-1])]
    found, rows = verdict(base, head, "--min-effect", min_effect)
    assert (found, rows["test_k"]["direction"]) == (code, direction)


@pytest.mark.parametrize(("args", "message"), [
    (["--base", "a.json"], "both sides"),
    (["--base", "a.json", "--head", "b.json", "c.json"], "paired in order"),
    (["--base", "missing.json", "--head", "missing.json", "--min-effect", "200%"], "between"),
    (["--base", "missing.json", "--head", "missing.json"], "no such file"),
])
def test_bad_input_is_exit_2_with_the_reason(tmp_path: Path, args: list[str], message: str) -> None:
    done = roofwatch(["verdict", *args], {"PWD": str(tmp_path)}, check=False)
    assert done.returncode == 2 and message in done.stdout + done.stderr
