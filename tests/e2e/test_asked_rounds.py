"""Rounds someone asks for are run: `--max-rounds` (or `[tool.roofwatch] ab_max_rounds`) measures an undecided
benchmark up to the cap, where the service's own cap stops one its first rounds project past it.

The head's process sleeps 30 ms times a factor that cycles 3, 1/3, 1 round by round (a counter file the
suite keeps in its worktree), the base's always 30 ms: three rounds spread the paired log-ratio by about
1.1 either way, which projects some twenty rounds to settle ±100 % — past a cap of 6. Unasked, the rounds
stop after three ("cannot settle"); asked, they run to six. Far beyond what this host's 20–45 % noise
between processes could change.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.sample_repo import commit, init
from support.tests_support import roofwatch

PYPROJECT = """\
[project]
name = "wobbly"
version = "0.0.1"

[tool.roofwatch]
min_effect = "100%"
{rounds}
[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest bench -q -p no:cacheprovider --benchmark-only --benchmark-min-rounds=3 --benchmark-max-time=0.01 --benchmark-warmup=off"
"""
KERNELS = """\
import pathlib
import time

# Which round this process is: the suite's own count, kept in its worktree across rounds.
_COUNT = pathlib.Path(".round")
ROUND = int(_COUNT.read_text()) if _COUNT.exists() else 0
_COUNT.write_text(str(ROUND + 1))
FACTORS = {factors}


def wobbly():
    time.sleep(0.03 * FACTORS[ROUND % len(FACTORS)])
"""
BENCH = """\
from kernels import wobbly


def test_wobbly(benchmark):
    benchmark(wobbly)
"""


@pytest.mark.parametrize(("asked", "setting", "rounds", "stop"), [
    ([], "", 3, "cannot settle"),                           # the service's cap: projected past it, dropped
    (["--max-rounds", "6"], "", 6, "round cap"),            # asked on the command line: measured up to it
    ([], "ab_max_rounds = 6\n", 6, "round cap"),            # asked by the repository (the base's table)
])
def test_an_asked_for_cap_is_measured_up_to(tmp_path: Path, asked: list[str], setting: str, rounds: int,
                                           stop: str) -> None:
    repo = tmp_path / "wobbly"
    init(repo)
    base = commit(repo, "kernels", {"pyproject.toml": PYPROJECT.format(rounds=setting), "bench/test_k.py": BENCH,
                                    "kernels.py": KERNELS.format(factors="[1.0]")}, 1)
    head = commit(repo, "wobble", {"kernels.py": KERNELS.format(factors="[3.0, 0.333, 1.0]")}, 2)
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'rw.db'}",
           "ROOFWATCH_AB_MIN_ROUNDS": "3", "ROOFWATCH_AB_MAX_ROUNDS": "6"}
    done = roofwatch(["compare", base, head, "--repo", str(repo), "--format", "json", *asked], env, check=False)
    report = json.loads(done.stdout)
    [row] = report["benchmarks"]
    assert (report["rounds"], report["stop_reason"]) == (rounds, stop), report
    assert row["direction"] == "inconclusive" and row["rounds"] == rounds and done.returncode == 3, row
    assert report["max_rounds"] == 6

    if not asked and not setting:
        # The terminal says that more rounds would help and how many, or what min_effect would settle it.
        table = roofwatch(["compare", base, head, "--repo", str(repo)], env, check=False)
        out = " ".join(table.stdout.split())
        assert "inconclusive test_wobbly" in out
        assert ("more rounds would help: about" in out and "--max-rounds" in out) or \
            "cannot be settled at ±100 %" in out, out
        assert "docs/deciding.md#my-unchanged-commits-stay-inconclusive" in out
