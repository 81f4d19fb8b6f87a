"""A/B comparisons of a repository tracked from outside: stored suites, backfill, precedence.

The repositories here declare no ``[tool.roofwatch]`` in any commit; roofwatch knows their suites
only from a stored config. Confirmation of a main-branch candidate, ``roofwatch compare`` and a
pull request's A/B must all measure what a run of each commit measures, under the same series
names, and record where the suites came from. Timings are planted sleeps set by the commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, create_engine, select
from support.fake_github import FakeGitHub
from support.github_support import SECRET, deliver, pull_request_payload
from support.planted_history import PlannedCommit, PlantedHistory, plant_history, suites_table
from support.sample_repo import commit, init
from support.tests_support import roofwatch

from roofwatch.service.core import embedded
from roofwatch.service.github.comment import MARKER

BASE = 0.02
REPO = "acme/planted"
STORED = "stored suites v1 (suites.toml) (the commit declares no suites)"
# An A/B's suites are the judging side's: the stored config, else the base commit's.
STORED_AB = "stored suites v1 (suites.toml) (the base commit declares no suites)"


def _history(tmp_path: Path) -> PlantedHistory:
    """c2 makes rmsnorm 2× slower; no commit declares suites."""
    return plant_history(tmp_path / "planted", [
        PlannedCommit("c0", benchmarks={"test_rmsnorm": BASE, "test_softmax": BASE}),
        PlannedCommit("c1"),
        PlannedCommit("c2", benchmarks={"test_rmsnorm": 2 * BASE}),
        PlannedCommit("c3"),
        PlannedCommit("c4"),
    ], dates="same", declare_suites=False)


def _env(tmp_path: Path) -> dict[str, str]:
    return {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'rw.db'}",
            "ROOFWATCH_AB_MIN_ROUNDS": "3", "ROOFWATCH_AB_MAX_ROUNDS": "6"}


def _comparisons(tmp_path: Path) -> list[tuple[str, str, str, str]]:
    """(purpose, state, verdict, suites_source) of every comparison, oldest first."""
    from roofwatch.service.core.models import Comparison

    engine = create_engine(f"sqlite:///{tmp_path / 'rw.db'}")
    with Session(engine) as session:
        rows = [(c.purpose, c.state, c.verdict, c.details.get("suites_source", ""))
                for c in session.exec(select(Comparison).order_by(Comparison.id))]  # type: ignore[arg-type]
    engine.dispose()
    return rows


def test_a_planted_slowdown_is_confirmed_by_an_ab_of_the_stored_suites(tmp_path: Path) -> None:
    history = _history(tmp_path)
    assert "tool.roofwatch" not in (history.repo / "pyproject.toml").read_text()
    suites = tmp_path / "suites.toml"
    suites.write_text(suites_table(with_checks=False))
    env = _env(tmp_path)
    roofwatch(["repo", "add", REPO, "--clone-url", str(history.repo), "--suites", str(suites)], env)
    roofwatch(["run", "--repo", REPO, "--last", "5"], env)

    names = {sha: name for name, sha in history.shas.items()}
    found = json.loads(roofwatch(["regressions", "--repo", REPO, "--format", "json"], env).stdout)
    assert [(r["kind"], r["benchmark"], names.get(r["commit"] or ""), r["state"]) for r in found] == [
        ("perf-regression", "test_rmsnorm", "c2", "new")]
    confirmations = [c for c in _comparisons(tmp_path) if c[0] == "confirm"]
    assert confirmations and all(state == "succeeded" for _, state, _, _ in confirmations), confirmations
    assert {source for *_, source in confirmations} == {STORED_AB}

    done = roofwatch(["compare", history["c1"], history["c2"], "--repo", REPO, "--format", "json"], env, check=False)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["verdict"] == "regression", report
    assert report["suites_source"] == STORED_AB
    directions = {row["benchmark"]: (row["suite"], row["direction"]) for row in report["benchmarks"]}
    assert directions["test_rmsnorm"] == ("benchmarks", "regression")
    # The unchanged sleep is never called a change. Whether the A/B can also rule one out
    # ("none") or only fails to ("inconclusive") depends on how late this loaded host wakes a
    # 20 ms sleep: once in a fresh-clone run, with three workers on two cores, it could not.
    assert directions["test_softmax"] in {("benchmarks", "none"), ("benchmarks", "inconclusive")}, directions
    assert set(directions) == {"test_rmsnorm", "test_softmax"}


KERNEL = "import time\n\n\ndef work():\n    time.sleep({seconds})\n"
BENCH = "from kernel import work\n\n\ndef test_work(benchmark):\n    benchmark(work)\n"
BACKFILL = """\
[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest bench -q -p no:cacheprovider -p pytest_benchmark.plugin --benchmark-only --benchmark-min-rounds=5 --benchmark-max-time=0.000001 --benchmark-warmup=off"
env = { PYTEST_DISABLE_PLUGIN_AUTOLOAD = "1" }
suites_from = "main"
suite_paths = ["bench/"]
"""


def test_both_sides_of_a_comparison_run_the_backfilled_suite(tmp_path: Path) -> None:
    repo = tmp_path / "legacy"
    init(repo)
    old = commit(repo, "work: 20 ms", {"kernel.py": KERNEL.format(seconds=BASE)}, 1)
    slow = commit(repo, "work: 40 ms", {"kernel.py": KERNEL.format(seconds=2 * BASE)}, 2)
    commit(repo, "bench: time work", {"bench/test_bench.py": BENCH}, 3)  # the suite arrives only now
    suites = tmp_path / "suites.toml"
    suites.write_text(BACKFILL)
    env = _env(tmp_path)
    roofwatch(["repo", "add", "acme/legacy", "--clone-url", str(repo), "--suites", str(suites)], env)

    done = roofwatch(["compare", old, slow, "--repo", "acme/legacy", "--format", "json"], env, check=False)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["verdict"] == "regression", report
    (row,) = report["benchmarks"]
    assert row["benchmark"] == "test_work" and row["suite"] == "benchmarks" and row["direction"] == "regression"
    assert report["suites_source"] == STORED_AB

    # The same series the runs of those commits write: one benchmark row, measured by both.
    roofwatch(["run", "--repo", "acme/legacy", "--rev", old, "--rev", slow], env)
    engine = create_engine(f"sqlite:///{tmp_path / 'rw.db'}")
    from roofwatch.service.core.models import Benchmark

    with Session(engine) as session:
        assert [(b.suite, b.name) for b in session.exec(select(Benchmark))] == [(row["suite"], "test_work")]
    engine.dispose()


def test_compare_takes_one_off_suites_and_a_backfill_ref_like_run(tmp_path: Path) -> None:
    repo = tmp_path / "legacy"
    init(repo)
    old = commit(repo, "work: 20 ms", {"kernel.py": KERNEL.format(seconds=BASE)}, 1)
    slow = commit(repo, "work: 40 ms", {"kernel.py": KERNEL.format(seconds=2 * BASE)}, 2)
    commit(repo, "bench: time work", {"bench/test_bench.py": BENCH}, 3)
    suites = tmp_path / "suites.toml"
    suites.write_text(BACKFILL.replace('suites_from = "main"\n', ""))
    done = roofwatch(["compare", old, slow, "--repo", str(repo), "--suites", str(suites), "--suites-from", "HEAD",
                      "--format", "json"], _env(tmp_path), check=False)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["verdict"] == "regression", report
    assert report["suites_source"] == "--suites suites.toml (the base commit declares no suites)"
    missing = roofwatch(["compare", old, slow, "--repo", str(repo), "--suites", str(tmp_path / "nothing.toml")],
                        _env(tmp_path), check=False)
    assert missing.returncode == 2 and "nothing.toml" in missing.stdout


def test_a_commit_that_declares_no_suites_and_no_stored_config_says_so(tmp_path: Path) -> None:
    history = _history(tmp_path)
    env = _env(tmp_path)
    roofwatch(["repo", "add", REPO, "--clone-url", str(history.repo)], env)
    done = roofwatch(["compare", history["c1"], history["c2"], "--repo", REPO, "--format", "json"], env, check=False)
    report = json.loads(done.stdout)
    assert done.returncode == 2 and report["state"] == "errored"
    assert report["error"] == ("base: no [[tool.roofwatch.suites]] in pyproject.toml "
                               "(suites a pull request adds are measured once it is merged)")


@pytest.fixture
def pr_client(roofwatch_env: Path, fake_github: FakeGitHub, tmp_path: Path,
              monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from support.environment import _reset_caches

    for name, value in {"GITHUB_WEBHOOK_SECRET": SECRET, "GITHUB_TOKEN": FakeGitHub.STATIC_TOKEN,
                        "GITHUB_API_URL": fake_github.url, "AB_MIN_ROUNDS": "3", "AB_MAX_ROUNDS": "6",
                        "PUBLIC_URL": "http://roofwatch.test"}.items():
        monkeypatch.setenv(f"ROOFWATCH_{name}", value)
    _reset_caches()
    from roofwatch.service.api.app import create_app
    from roofwatch.service.core.db import migrate, session_scope
    from roofwatch.service.core.models import Repository
    from roofwatch.service.records.repositories import register
    from roofwatch.service.records.suite_configs import store

    history = _history(tmp_path)
    migrate()
    with session_scope() as session:
        repository: Repository = register(session, REPO, str(history.repo), "main")
        store(session, repository, suites_table(with_checks=False), "suites.toml")
    with TestClient(create_app()) as client:
        yield client, history
    assert embedded.MEASURE.drain(600) and embedded.REPORTS.drain(120)


def test_a_pull_request_of_a_repository_tracked_from_outside_gets_its_verdict(
        pr_client: tuple[TestClient, PlantedHistory], fake_github: FakeGitHub, shared_corpus: Path) -> None:
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import Run

    client, history = pr_client
    opened = pull_request_payload(shared_corpus, "opened", REPO, 5, history["c2"], history["c1"])
    assert deliver(client, "pull_request", opened).status_code == 202
    assert embedded.MEASURE.drain(900) and embedded.REPORTS.drain(120)

    with session_scope() as session:
        run = session.exec(select(Run).where(Run.pr_number == 5)).one()
        assert (run.state, run.suites_source) == ("succeeded", STORED_AB), run.error
    final = fake_github.statuses(REPO, history["c2"])[-1]
    assert final["state"] == "failure" and "test_rmsnorm" in final["description"], final
    (comment,) = fake_github.comments(REPO, 5)
    assert MARKER in comment["body"] and "test_rmsnorm" in comment["body"]
    assert fake_github.violations == []
