"""Main-branch verdicts end to end, on histories whose timings the commits set (sleeps).

Each test plants a history with ``planted_history``, measures it through the real
``roofwatch run`` (checkout, sandboxed suites, ingest, detection, narrowing, A/B confirmation,
storage) and reads ``roofwatch regressions --all --format json``. A planted 2× sleep is far
beyond this host's process-to-process noise once A/B'd, so the expected verdict is certain:
exactly the planted changes, each once, at its first bad commit, in its direction, ``fixed``
where the code returned.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from support.planted_history import PlannedCommit, PlantedHistory, check_id, plant_history
from support.tests_support import roofwatch

from roofwatch.service.core.db import downgrade

BASE = 0.02
FAST_MATMUL, SLOW_MATMUL = 0.02, 0.10


def _history(tmp_path: Path, name: str, dates: str = "increasing",
             extra: list[PlannedCommit] | None = None) -> PlantedHistory:
    """c2 slows rmsnorm 2×, c3 breaks softmax's check and c4 fixes it, c5 makes matmul 5× faster."""
    return plant_history(tmp_path / name, [
        PlannedCommit("c0", benchmarks={"test_rmsnorm": BASE, "test_softmax": BASE, "test_matmul": SLOW_MATMUL},
                      checks={"test_softmax": True}),
        PlannedCommit("c1"),
        PlannedCommit("c2", benchmarks={"test_rmsnorm": 2 * BASE}),
        PlannedCommit("c3", checks={"test_softmax": False}),
        PlannedCommit("c4", checks={"test_softmax": True}),
        PlannedCommit("c5", benchmarks={"test_matmul": FAST_MATMUL}),
        PlannedCommit("c6"),
        *(extra or []),
    ], dates=dates)


def _env(tmp_path: Path, database: str) -> dict[str, str]:
    return {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_DATABASE_URL": database,
            "ROOFWATCH_AB_MIN_ROUNDS": "3", "ROOFWATCH_AB_MAX_ROUNDS": "6"}


def _run(history: PlantedHistory, env: dict[str, str], *names: str, force: bool = False) -> None:
    revs = [arg for name in names for arg in ("--rev", history.shas[name])]
    roofwatch(["run", "--repo", str(history.repo), *revs, *(["--force"] if force else [])], env, check=False)


def _verdicts(history: PlantedHistory, env: dict[str, str]) -> list[tuple[str, str, str, str]]:
    """(kind, benchmark or test, first bad commit's plan name, state) of every change shown."""
    names = {sha: name for name, sha in history.shas.items()}
    done = roofwatch(["regressions", "--repo", str(history.repo), "--format", "json"], env)
    return sorted((row["kind"], row["benchmark"], names.get(row["commit"] or "", f"range {row['range']}"),
                   row["state"]) for row in json.loads(done.stdout))


PLANTED = sorted([
    ("perf-regression", "test_rmsnorm", "c2", "new"),
    ("correctness-failure", check_id("test_softmax").split("::", 1)[1], "c3", "fixed"),
    ("perf-improvement", "test_matmul", "c5", "new"),
])


def _story(database: Path, history: PlantedHistory, done: object) -> str:
    """What a failed assertion needs to tell why: every candidate's fate, every A/B's answer, and the run's log."""
    names = {sha: name for name, sha in history.shas.items()}
    with sqlite3.connect(database) as db:
        shas = dict(db.execute("SELECT id, sha FROM 'commit'"))
        lines = [f"change {cid} {kind} {phase} {names.get(start)}..{names.get(end)}: "
                 f"{json.loads(details or '{}').get('rejected', '')}"
                 for cid, kind, phase, start, end, details in db.execute(
                     "SELECT id, kind, phase, range_start_sha, range_end_sha, details FROM change")]
        lines += [f"A/B {names.get(shas.get(base))}..{names.get(shas.get(head))} {key.rsplit(':', 1)[-1]} "
                  f"{state}: {direction} {reason}"
                  for base, head, key, state, direction, reason in db.execute(
                      "SELECT c.base_commit_id, c.head_commit_id, c.idempotency_key, c.state, r.direction, r.reason "
                      "FROM comparison c LEFT JOIN comparisonresult r ON r.comparison_id = c.id ORDER BY c.id")]
    return "\n".join([*lines, str(getattr(done, "stdout", ""))[-4000:], str(getattr(done, "stderr", ""))[-4000:]])


def _planted(found: list[tuple[str, str, str, str]]) -> list[tuple[str, str, str, str]]:
    # The correctness row names its test id; compare on the function name.
    return sorted((kind, name.rsplit("::", 1)[-1], commit, state) for kind, name, commit, state in found)


@pytest.mark.parametrize("dates", ["increasing", "same", "backwards"])
def test_every_commit_measured_gives_the_planted_changes_whatever_the_dates(
        tmp_path: Path, dates: str) -> None:
    history = _history(tmp_path, f"kernels-{dates}", dates)
    env = _env(tmp_path, f"sqlite:///{tmp_path / 'rw.db'}")
    _run(history, env, *[f"c{i}" for i in range(7)])
    assert _planted(_verdicts(history, env)) == _planted(PLANTED)


def test_on_postgresql_the_same_history_twice_stores_each_change_once(tmp_path: Path, postgres_url: str) -> None:
    history = _history(tmp_path, f"kernels-pg-{tmp_path.name}", "same")
    env = _env(tmp_path, postgres_url)
    # The session's PostgreSQL database is shared by the tests of this process: start empty, and
    # leave it empty for tests that read every row in it.
    downgrade(postgres_url, "base")
    roofwatch(["db", "upgrade"], env)  # a shared server is migrated on purpose, never by `run`
    try:
        _run(history, env, *[f"c{i}" for i in range(7)])
        _run(history, env, *[f"c{i}" for i in range(7)], force=True)
        assert _planted(_verdicts(history, env)) == _planted(PLANTED)
    finally:
        downgrade(postgres_url, "base")


def test_only_the_two_ends_measured_are_narrowed_to_each_first_bad_commit(tmp_path: Path) -> None:
    history = _history(tmp_path, "kernels-ends", "same")
    env = _env(tmp_path, f"sqlite:///{tmp_path / 'rw.db'}")
    _run(history, env, "c0")
    _run(history, env, "c6")
    # Narrowing rmsnorm's and matmul's steps measures c3, c2, c1 and c5, c4: the failure that
    # came and went between the two ends is found on the way, narrowed and marked fixed too.
    assert _planted(_verdicts(history, env)) == _planted(PLANTED)


def test_out_of_order_and_in_two_halves_give_the_same_verdicts(tmp_path: Path) -> None:
    history = _history(tmp_path, "kernels-order", "backwards")
    env = _env(tmp_path, f"sqlite:///{tmp_path / 'rw.db'}")
    for name in ("c6", "c0", "c4", "c3"):
        _run(history, env, name)
    _run(history, env, "c1", "c2", "c5")
    assert _planted(_verdicts(history, env)) == _planted(PLANTED)


def test_two_steps_two_commits_apart_in_one_benchmark_are_two_changes(tmp_path: Path) -> None:
    history = plant_history(tmp_path / "kernels-two", [
        PlannedCommit("c0", benchmarks={"test_rmsnorm": BASE, "test_softmax": BASE}),
        PlannedCommit("c1"),
        PlannedCommit("c2", benchmarks={"test_rmsnorm": 2 * BASE}),
        PlannedCommit("c3"),
        PlannedCommit("c4", benchmarks={"test_rmsnorm": 4 * BASE}),
        PlannedCommit("c5"),
    ], dates="same")
    env = _env(tmp_path, f"sqlite:///{tmp_path / 'rw.db'}")
    _run(history, env, *[f"c{i}" for i in range(6)])
    assert _verdicts(history, env) == [("perf-regression", "test_rmsnorm", "c2", "new"),
                                       ("perf-regression", "test_rmsnorm", "c4", "new")]


def test_a_bisection_misled_by_one_slow_run_still_names_the_first_bad_commit(tmp_path: Path) -> None:
    """c8 slows rmsnorm 2×. Measured c0-c6 and c8, the step is narrowed by measuring c7, whose one run a busy host
    slowed 2× too: the bisection names c7, and the A/B of c6 → c7 finds nothing (the slowdown has lapsed). The
    search among its neighbours A/Bs across c3 → c8, halves it, and confirms c8."""
    history = plant_history(tmp_path / "kernels-misled", [
        PlannedCommit("c0", benchmarks={"test_rmsnorm": BASE}),
        *(PlannedCommit(f"c{i}") for i in range(1, 8)),
        PlannedCommit("c8", benchmarks={"test_rmsnorm": 2 * BASE}),
    ], dates="same")
    history.slow_down(2.0, commits=["c7"], processes=1)
    env = _env(tmp_path, f"sqlite:///{tmp_path / 'rw.db'}")
    # The hook's file lies outside the worktree, which the sandbox hides from a suite by design
    env["ROOFWATCH_SANDBOX"] = "unconfined"
    revs = [arg for name in [*(f"c{i}" for i in range(7)), "c8"] for arg in ("--rev", history.shas[name])]
    done = roofwatch(["run", "--repo", str(history.repo), *revs], env, check=False)
    story = _story(tmp_path / "rw.db", history, done)
    assert history.slowed_processes() == 1, story  # c7's bisection run, and nothing after it
    assert _verdicts(history, env) == [("perf-regression", "test_rmsnorm", "c8", "new")], story
    c3, c6, c7, c8 = (history.shas[name][:7] for name in ("c3", "c6", "c7", "c8"))
    assert f"seek the step named at {c6}..{c7} across {c3}..{c8}" in done.stdout, story  # what the long A/Bs are for
