"""The planted-history harness: the dates it promises, and timings set by the commit, not the CPU.

End to end through ``roofwatch run --repo PATH --rev SHA`` on SQLite: the stored medians follow
the planted sleeps (a 2× sleep is far beyond any scheduling noise), a planted failure is stored
as failed with its reported error, and the slowdown hook slows every benchmark of the processes
it names by one factor and then lapses. What roofwatch concludes from the timings is not
asserted here; the main-branch flow's own tests do that on these histories.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.planted_history import (
    Busy,
    Check,
    PlannedCommit,
    check_id,
    plant_history,
    stored_medians,
    stored_outcomes,
)
from support.tests_support import roofwatch

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

BASE, SLOW = 0.02, 0.04


def _dates(repo: Path) -> list[tuple[int, int]]:
    """(committer, author) epoch seconds, oldest commit first."""
    log = subprocess.run(["git", "log", "--reverse", "--format=%ct %at"], cwd=repo, check=True,
                         capture_output=True, text=True).stdout.split("\n")
    return [(int(c), int(a)) for c, a in (line.split() for line in log if line)]


def _plan(count: int) -> list[PlannedCommit]:
    return [PlannedCommit("c0", benchmarks={"test_rmsnorm": BASE})] + [
        PlannedCommit(f"c{i}") for i in range(1, count)
    ]


@pytest.mark.parametrize(("mode", "expected"), [
    ("increasing", lambda n: [1_700_000_000 + 60 * i for i in range(n)]),
    ("same", lambda n: [1_700_000_000] * n),
    ("backwards", lambda n: [1_700_000_000 - 60 * i for i in range(n)]),
    ([1_600_000_005, 1_600_000_009, 1_600_000_009, 1_600_000_007], lambda n: [1_600_000_005, 1_600_000_009, 1_600_000_009, 1_600_000_007]),
])
def test_commits_carry_the_requested_dates(tmp_path: Path, mode: object, expected: object) -> None:
    history = plant_history(tmp_path / "kernels", _plan(4), dates=mode)  # type: ignore[arg-type]
    stamps = expected(4)  # type: ignore[operator]
    assert _dates(history.repo) == [(s, s) for s in stamps]
    order = subprocess.run(["git", "rev-list", "--first-parent", "--reverse", "main"], cwd=history.repo,
                           check=True, capture_output=True, text=True).stdout.split()
    assert order == [history.shas[f"c{i}"] for i in range(4)]  # the graph order is the plan's


def test_each_commit_holds_its_own_planted_numbers(tmp_path: Path) -> None:
    history = plant_history(tmp_path / "kernels", [
        PlannedCommit("c0", benchmarks={"test_rmsnorm": BASE, "test_spin": Busy(1000)},
                      checks={"test_softmax": Check(max_abs_err=1e-7)}),
        PlannedCommit("c1", benchmarks={"test_rmsnorm": SLOW}),
        PlannedCommit("c2", checks={"test_softmax": False}),
    ])

    def show(name: str, path: str) -> str:
        return subprocess.run(["git", "show", f"{history.shas[name]}:{path}"], cwd=history.repo, check=True,
                              capture_output=True, text=True).stdout

    assert "benchmark(pause, 0.02)" in show("c0", "bench/test_planted.py")
    assert "benchmark(pause, 0.04)" in show("c1", "bench/test_planted.py")
    assert "benchmark(spin, 1000)" in show("c2", "bench/test_planted.py")  # inherited
    assert "record_property('max_abs_err', 1e-07)" in show("c1", "checks/test_planted.py")
    assert "assert False" in show("c2", "checks/test_planted.py")
    assert "COMMIT = 'c2'" in show("c2", "planted_timing.py")
    assert history.benchmarks["c2"] == {"test_rmsnorm": SLOW, "test_spin": Busy(1000)}
    assert history.checks["c2"] == {"test_softmax": Check(passes=False)}


@pytest.mark.parametrize(("plan", "message"), [
    ([], "at least one commit"),
    ([PlannedCommit("c0")], "at least one benchmark"),
    ([PlannedCommit("c0", benchmarks={"rmsnorm": BASE})], "not a pytest function name"),
    ([PlannedCommit("c0", benchmarks={"test_a": 0.0})], "positive work"),
    ([PlannedCommit("c0", benchmarks={"test_a": BASE}), PlannedCommit("c0")], "names repeat"),
])
def test_bad_plans_are_clear_errors(tmp_path: Path, plan: list[PlannedCommit], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plant_history(tmp_path / "kernels", plan)


def _env(tmp_path: Path) -> tuple[dict[str, str], str]:
    url = f"sqlite:///{tmp_path / 'rw.db'}"
    return {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_DATABASE_URL": url}, url


def test_stored_medians_and_outcomes_follow_the_plan(tmp_path: Path) -> None:
    # One committer second for all three commits: the harness must not depend on dates.
    history = plant_history(tmp_path / "kernels", [
        PlannedCommit("c0", benchmarks={"test_rmsnorm": BASE, "test_softmax": BASE, "test_spin": Busy(2000)},
                      checks={"test_softmax": Check(max_abs_err=1e-7), "test_rmsnorm": True}),
        PlannedCommit("c1", benchmarks={"test_rmsnorm": SLOW},
                      checks={"test_softmax": Check(passes=False, max_abs_err=1e-4)}),
        PlannedCommit("c2", checks={"test_softmax": Check(max_abs_err=1e-7)}),
    ], dates="same")
    env, url = _env(tmp_path)
    for name in ("c0", "c1", "c2"):
        roofwatch(["run", "--repo", str(history.repo), "--rev", history.shas[name]], env, check=False)

    medians = stored_medians(url)
    c0, c1, c2 = (history.shas[n] for n in ("c0", "c1", "c2"))
    assert {name for sha, name in medians if sha == c0} == {"test_rmsnorm", "test_softmax", "test_spin"}
    for sha in (c0, c1, c2):
        assert medians[sha, "test_softmax"] >= BASE  # a sleep never ends early
    assert medians[c1, "test_rmsnorm"] >= 1.6 * medians[c0, "test_rmsnorm"], medians
    assert medians[c2, "test_rmsnorm"] >= 1.6 * medians[c0, "test_rmsnorm"], medians
    assert medians[c1, "test_softmax"] < 1.6 * medians[c0, "test_softmax"], medians

    outcomes = stored_outcomes(url)
    softmax, rmsnorm = check_id("test_softmax"), check_id("test_rmsnorm")
    assert outcomes[c0, softmax] == ("passed", 1e-7)
    assert outcomes[c1, softmax] == ("failed", 1e-4)
    assert outcomes[c2, softmax] == ("passed", 1e-7)
    assert {outcomes[sha, rmsnorm][0] for sha in (c0, c1, c2)} == {"passed"}


def test_slowdown_hook_slows_every_benchmark_of_the_named_processes_then_lapses(tmp_path: Path) -> None:
    history = plant_history(tmp_path / "kernels", [
        PlannedCommit("c0", benchmarks={"test_rmsnorm": BASE, "test_softmax": BASE}),
        PlannedCommit("c1"),
    ], dates="backwards")
    env, url = _env(tmp_path)
    # The hook's file lies outside the worktree, which the sandbox hides from a suite by design;
    # this test is about the hook, so its suites run unconfined.
    env["ROOFWATCH_SANDBOX"] = "unconfined"
    history.slow_down(2.5, commits=["c1"], processes=1)
    c0, c1 = history.shas["c0"], history.shas["c1"]
    roofwatch(["run", "--repo", str(history.repo), "--rev", c0], env, check=False)
    roofwatch(["run", "--repo", str(history.repo), "--rev", c1], env, check=False)
    assert history.slowed_processes() == 1
    slowed = stored_medians(url)
    for name in ("test_rmsnorm", "test_softmax"):  # unchanged code, one common factor
        assert slowed[c1, name] >= 2.5 * BASE
        assert slowed[c1, name] >= 1.6 * slowed[c0, name], slowed

    # The rule covered one process; the next measurement of c1 runs at the planted speed.
    roofwatch(["run", "--repo", str(history.repo), "--rev", c1, "--force"], env, check=False)
    assert history.slowed_processes() == 1
    again = stored_medians(url)
    for name in ("test_rmsnorm", "test_softmax"):
        assert slowed[c1, name] >= 1.6 * again[c1, name], (slowed, again)

    with pytest.raises(ValueError, match="not in the plan"):
        history.slow_down(2.0, commits=["c9"])
