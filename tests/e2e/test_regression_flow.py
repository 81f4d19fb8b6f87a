"""The main-branch flow end to end: candidates → A/B confirmation → bisection → regressions.

The planted repository (``planted_repo.py``) holds a 10× slowdown, a correctness bug that is
later fixed, and a 10× speedup among neutral commits, in real kernels timed for real. roofwatch
must report exactly those, name the first bad commit of each, and say nothing about the neutral
ones. The changes are 10×, far beyond the worst A/B threshold seen on this host with every core
busy (+250 %, from 52 % per-process noise).

Bisection from only the two ends is tested with timings the commits set
(``test_main_branch_history.py``): a midpoint judged on real timings of a loaded two-core host
is exactly the noise a test must not decide on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.planted_repo import build_planted_history
from support.tests_support import roofwatch

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    repo = tmp_path / "planted"
    return repo, build_planted_history(repo)


@pytest.fixture
def env(tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    """PostgreSQL when it is there (always in CI), else the embedded SQLite default."""
    from support.environment import _postgres_reachable

    url = request.getfixturevalue("postgres_url") if _postgres_reachable() else f"sqlite:///{tmp_path}/rw.db"
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_DATABASE_URL": url}
    roofwatch(["db", "upgrade"], env)
    return env


Row = tuple[str, str, "str | None", str]


def _reported(env: dict[str, str], repo: Path) -> tuple[set[Row], list[dict[str, Any]]]:
    # this repository's only: the PostgreSQL database is the worker's, and other tests store the same history
    rows = json.loads(roofwatch(["regressions", "--repo", str(repo), "--format", "json"], env).stdout)
    return {(r["kind"], r["benchmark"], r["commit"], r["state"]) for r in rows}, rows


EXPECTED = {
    ("perf-regression", "test_rmsnorm", "slow", "new"),
    ("correctness-failure", "checks.test_kernels::test_softmax", "bug", "fixed"),
    ("perf-improvement", "test_matmul", "fast", "new"),
}


def _expected(shas: dict[str, str]) -> set[Row]:
    return {(kind, name, shas[commit], state) for kind, name, commit, state in EXPECTED}


def _check_sizes(rows: list[dict[str, Any]]) -> None:
    by_kind = {r["kind"]: r for r in rows}
    slow, fast = by_kind["perf-regression"], by_kind["perf-improvement"]
    assert slow["change_pct"] > 40 and slow["ci_low"] > 0, slow
    assert fast["change_pct"] < -50 and fast["ci_high"] < 0, fast
    assert slow["p_value"] < 0.01 and fast["p_value"] < 0.01


def test_every_commit_measured_reports_exactly_the_planted_changes(
    planted: tuple[Path, dict[str, str]], env: dict[str, str]
) -> None:
    repo, shas = planted
    done = roofwatch(["run", "--repo", str(repo), "--last", str(len(shas))], env, check=False, timeout=1200)
    assert done.returncode == 1, done.stdout  # the buggy commits fail their runs
    found, rows = _reported(env, repo)
    assert found == _expected(shas), json.dumps(rows, indent=1)
    _check_sizes(rows)

