"""Branch commits measured with ``roofwatch run`` stay off the default branch's history.

A real git repository in a temp dir, whose timings the commits set (sleeps), measured through the
real ``roofwatch run`` (checkout, sandboxed suites, ingest, detection), then read back through the
CLI's JSON, the database, the series API and the dashboard. Two sibling branches leave ``main`` at
the same commit, so each branch head has the same first-parent position as ``main``'s next commit:
filed into main's history, one would be drawn as main's commit there (and a 2× slower branch head
would be a regression of main).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, create_engine, select
from support.sample_repo import commit, git, init
from support.tests_support import roofwatch

PYPROJECT = """\
[project]
name = "branchy"
version = "0.0.1"

[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest bench -q -p no:cacheprovider -p pytest_benchmark.plugin --benchmark-only --benchmark-min-rounds=5 --benchmark-max-time=0.000001 --benchmark-warmup=off"
env = { PYTEST_DISABLE_PLUGIN_AUTOLOAD = "1" }
"""
KERNEL = "import time\n\n# {note}\n\n\ndef work():\n    time.sleep({seconds})\n"
BENCH = "from kernel import work\n\n\ndef test_work(benchmark):\n    benchmark(work)\n"
BASE = 0.02


def _kernel(note: str, seconds: float = BASE) -> dict[str, str]:
    return {"kernel.py": KERNEL.format(note=note, seconds=seconds)}


def _run(repo: Path, env: dict[str, str], *args: str) -> list[dict[str, Any]]:
    return json.loads(roofwatch(["run", "--repo", str(repo), *args, "--format", "json"], env).stdout)


def _repository_row(html: str) -> str:
    """The overview's repositories table: its head column is "latest default-branch commit"."""
    return html.split('<table id="repositories">', 1)[1].split("</table>", 1)[0]


def test_branch_heads_are_stored_as_branch_runs_and_never_enter_the_default_branch_history(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from roofwatch.service.core.models import Benchmark, Change, Commit, LatestMeasurement, Run

    repo = tmp_path / "kernels"
    init(repo)
    c1 = commit(repo, "c1: work", {"pyproject.toml": PYPROJECT, "bench/test_work.py": BENCH, **_kernel("c1")}, 1)
    c2 = commit(repo, "c2: docs", _kernel("c2"), 2)
    git(repo, "checkout", "-q", "-b", "slow-feature")
    slow = commit(repo, "feature: a second pass (2x slower)", _kernel("slow", 2 * BASE), 3)
    git(repo, "checkout", "-q", "-b", "other", c2)
    other = commit(repo, "other: comments", _kernel("other"), 4)
    git(repo, "checkout", "-q", "main")
    c3 = commit(repo, "c3: comments", _kernel("c3"), 5)
    data = tmp_path / "data"
    env = {"ROOFWATCH_DATA_DIR": str(data), "ROOFWATCH_AB_MIN_ROUNDS": "3", "ROOFWATCH_AB_MAX_ROUNDS": "6"}

    assert [row["branch"] for row in _run(repo, env, "--rev", c1, "--rev", c2)] == [None, None]
    # The user checks the feature out and measures what they have: HEAD, a commit main does not hold.
    git(repo, "checkout", "-q", "slow-feature")
    done = roofwatch(["run", "--repo", str(repo), "--format", "json"], env)
    [row] = json.loads(done.stdout)
    assert (row["sha"], row["branch"], row["branch_base"], row["state"]) == (slow, "slow-feature", c2, "succeeded")
    assert row["changes"] == [] and row["candidates"] == []
    assert f"{slow[:12]} is on slow-feature, not on main: measured as a branch run, kept off main's history" \
        in " ".join(done.stderr.split())
    git(repo, "checkout", "-q", "main")
    [row] = _run(repo, env, "--rev", "other")
    assert (row["sha"], row["branch"], row["branch_base"]) == (other, "other", c2)
    # main's own next commit, at the first-parent position both branch heads have: its baseline is c2.
    [row] = _run(repo, env, "--rev", "main")
    assert (row["sha"], row["branch"]) == (c3, None) and row["candidates"] == []
    table = roofwatch(["run", "--repo", str(repo), "--rev", "slow-feature"], env).stdout
    assert f"{slow[:12]} already measured" in table  # as a branch run: its kind counts, not main's

    engine = create_engine(f"sqlite:///{data / 'roofwatch.db'}")
    with Session(engine) as session:
        runs = {sha: (run.id, run.trigger, run.branch, run.base_sha) for run, sha in session.exec(
            select(Run, Commit.sha).where(Run.commit_id == Commit.id).order_by(Run.id))}  # type: ignore[arg-type]
        [benchmark] = session.exec(select(Benchmark)).all()
        latest = session.exec(select(LatestMeasurement)).one()
        changes = session.exec(select(Change)).all()
    engine.dispose()
    assert {sha: rest for sha, (_, *rest) in runs.items()} == {
        c1: ["manual", "", None], c2: ["manual", "", None], slow: ["manual", "slow-feature", c2],
        other: ["manual", "other", c2], c3: ["manual", "", None]}
    assert latest.run_id == runs[c3][0]  # the newest run is other's; main's newest state is c3's
    assert changes == []  # a branch 2x slower is no regression of main, nor a baseline of c3

    for name, value in {**env, "ROOFWATCH_DATABASE_URL": f"sqlite:///{data / 'roofwatch.db'}"}.items():
        monkeypatch.setenv(name, value)
    from support.environment import _reset_caches

    _reset_caches()
    from roofwatch.service.api.app import create_app

    with TestClient(create_app()) as client:
        # The series API and its CSV export: main's commits only.
        assert [p["sha"] for p in client.get(f"/api/benchmarks/{benchmark.id}/series").json()["points"]] == [c1, c2, c3]
        csv_shas = [line.split(",")[1] for line in client.get(f"/api/benchmarks/{benchmark.id}/series.csv").text.splitlines()[1:]]
        assert csv_shas == [c1, c2, c3]
        # The chart: each point carries its run id; no branch run is drawn.
        html = client.get(f"/benchmarks/{benchmark.id}").text
        figure = json.loads(html.split('<script type="application/json" id="figure">', 1)[1].split("</script>", 1)[0])
        drawn = {run for trace in figure["data"] for run in trace.get("customdata", [])}
        assert drawn == {runs[c1][0], runs[c2][0], runs[c3][0]}
        # The overview calls main's head the latest default-branch commit, though a branch ran after it.
        heads = _repository_row(client.get("/").text)
        assert c3[:12] in heads and slow[:12] not in heads and other[:12] not in heads
        overview = client.get("/").text
        assert re.search(rf"{other[:12]}</td>.*?branch <b>other</b>", overview, re.S)  # recent runs say which branch
        # The branch run's own page says where it belongs.
        page = client.get(f"/runs/{runs[slow][0]}").text
        assert "branch <b>slow-feature</b>" in page and f"roofwatch compare {c2[:12]} {slow[:12]}" in page
        api = client.get(f"/api/runs/{runs[slow][0]}").json()["run"]
        assert (api["branch"], api["base_sha"]) == ("slow-feature", c2)
        assert client.get(f"/api/runs/{runs[c3][0]}").json()["run"]["branch"] == ""
    _reset_caches()


def test_a_branch_commit_merged_fast_forward_is_measured_again_as_the_default_branchs(tmp_path: Path) -> None:
    """Once main holds the commit, its earlier branch run does not stand for it: main's history gets its own."""
    repo = tmp_path / "kernels"
    init(repo)
    commit(repo, "c1: work", {"pyproject.toml": PYPROJECT, "bench/test_work.py": BENCH, **_kernel("c1")}, 1)
    git(repo, "checkout", "-q", "-b", "topic")
    topic = commit(repo, "topic: comments", _kernel("topic"), 2)
    git(repo, "checkout", "-q", "main")
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data")}

    [row] = _run(repo, env, "--rev", "topic")
    assert (row["sha"], row["branch"]) == (topic, "topic")
    git(repo, "merge", "-q", "--ff-only", "topic")
    rows = _run(repo, env, "--last", "2")
    assert [(r["sha"], r["branch"], r["state"]) for r in rows][-1] == (topic, None, "succeeded")
    assert rows[-1]["run"] != row["run"]
