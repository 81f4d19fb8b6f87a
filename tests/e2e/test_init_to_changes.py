"""A repository that never heard of roofwatch, tracked from `roofwatch init` to stored changes.

Shaped like a real library: a ``src/`` layout, no ``[tool.roofwatch]``, an optional extra that a
benchmark file imports, and pytest-benchmark microbenchmarks of a few microseconds, each with
100,000+ rounds. The planted change is fixed work (the checksum makes 40 passes instead of
one), so the verdict does not depend on this host's speed.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from support.sample_repo import commit, init
from support.tests_support import roofwatch

from roofwatch.workers.suite_discovery import discover, suites_toml

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PYPROJECT = """\
[project]
name = "fastlib"
version = "1.0"
dependencies = []

[project.optional-dependencies]
fast = ["numpy>=1.20"]
"""
LIBRARY = """\
PASSES = {passes}


def checksum(values):
    total = 0
    for _ in range(PASSES):
        for value in values:
            total ^= value
    return total
"""
BENCHMARKS = """\
import numpy  # the optional extra "fast"

from fastlib import checksum

VALUES = list(range(4))


def test_checksum(benchmark):
    assert benchmark(checksum, VALUES) == numpy.bitwise_xor.reduce(VALUES)
"""
TESTS = """\
from fastlib import checksum


def test_checksum():
    assert checksum([1, 2, 3]) == 0
"""


def _library(repo: Path) -> dict[str, str]:
    init(repo)
    shas = {"v1": commit(repo, "fastlib 1.0", {
        "pyproject.toml": PYPROJECT, "src/fastlib/__init__.py": LIBRARY.format(passes=1),
        "bench/test_checksum.py": BENCHMARKS, "tests/test_unit.py": TESTS}, 1)}
    shas["docs"] = commit(repo, "Document checksum", {"README.md": "fastlib\n"}, 2)
    shas["slow"] = commit(repo, "checksum: forty passes", {"src/fastlib/__init__.py": LIBRARY.format(passes=40)}, 3)
    return shas


def test_init_finds_benchmarks_src_layout_and_the_extras_the_suites_import(tmp_path: Path) -> None:
    repo = tmp_path / "lib"
    (repo / "src" / "lib2").mkdir(parents=True)
    (repo / "src" / "lib2" / "__init__.py").write_text("")
    (repo / "benchmarks" / "micro").mkdir(parents=True)
    (repo / "pyproject.toml").write_text('[project]\nname = "lib2"\ndependencies = ["numpy"]\n'
                                         '[project.optional-dependencies]\n'
                                         'speed = ["not-installed-here-pkg>=2; python_version>\'3\'"]\n')
    (repo / "benchmarks" / "micro" / "test_a.py").write_text(
        "import lib2\nimport numpy\nimport not_installed_here_pkg\nimport nowhere_declared\n\n"
        "def test_a(benchmark):\n    benchmark(int, 1)\n")
    (repo / "benchmarks" / "test_b.py").write_text("def test_b(benchmark, tmp_path):\n    benchmark(int, 2)\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_c.py").write_text("def test_c():\n    assert True\n")

    found = discover(repo)

    assert found.benchmark_dirs == ["benchmarks"] and found.benchmark_files == 2
    assert found.test_dirs == ["tests"] and (found.src_layout, found.package) == (True, "lib2")
    assert found.install == ["not-installed-here-pkg>=2"]  # declared in an extra, absent here
    assert found.unresolved == ["nowhere_declared"]
    text = suites_toml(found)
    assert "command = 'python -m pytest benchmarks -q --benchmark-only'" in text
    assert 'env = { PYTHONPATH = "src" }' in text
    from roofwatch.suite_config.external import parse_suites_file
    benchmarks, tests = parse_suites_file(text).suites
    # The extra that declares what the benchmarks import: each commit's own environment, built with it.
    assert found.extras == ["speed"] and benchmarks.environment is not None
    assert benchmarks.environment.project == ".[speed]" and benchmarks.setup is None
    assert (tests.kind, tests.env) == ("correctness", {"PYTHONPATH": "src"})
    assert "'nowhere_declared'" in text


def test_init_refuses_a_folder_without_tests_and_an_existing_file(tmp_path: Path) -> None:
    empty = roofwatch(["init", str(tmp_path)], {"ROOFWATCH_DATA_DIR": str(tmp_path / "data")}, check=False)
    assert empty.returncode == 2 and "no pytest-benchmark tests" in empty.stderr
    repo = tmp_path / "lib"
    _library(repo)
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data")}
    roofwatch(["init", str(repo)], env)
    again = roofwatch(["init", str(repo)], env, check=False)
    assert again.returncode == 2 and "exists; --force overwrites it" in again.stderr


def test_a_library_is_tracked_from_init_to_a_stored_change(roofwatch_env: Path, tmp_path: Path) -> None:
    repo = tmp_path / "fastlib"
    shas = _library(repo)
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_AB_MIN_ROUNDS": "3",
           "ROOFWATCH_AB_MAX_ROUNDS": "4"}

    # Without suites the commits are recorded `skipped`, and the message says what to do.
    skipped = json.loads(roofwatch(["run", "--repo", str(repo), "--rev", shas["v1"], "--format", "json"], env).stdout)
    assert skipped[0]["state"] == "skipped" and "roofwatch init" in skipped[0]["reason"]

    suites_file = tmp_path / "suites.toml"
    roofwatch(["init", str(repo), "--output", str(suites_file)], env)
    text = suites_file.read_text()
    assert 'env = { PYTHONPATH = "src" }' in text and "environment =" not in text  # numpy is installed here
    # Edited as a user would: at least 100,000 rounds per microbenchmark, as pytest-benchmark
    # records for microsecond functions on a fast machine.
    suites_file.write_text(text.replace("--benchmark-only", "--benchmark-only --benchmark-min-rounds=100000"))
    roofwatch(["repo", "add", "acme/fastlib", "--clone-url", str(repo), "--suites", str(suites_file)], env)

    # The skipped commit runs with the new suites without --force.
    rows = json.loads(roofwatch(["run", "--repo", "acme/fastlib", "--last", "3", "--format", "json"], env,
                                check=False).stdout)
    assert [(r["sha"], r["state"], r["analysis"]) for r in rows] == [
        (shas["v1"], "succeeded", "done"), (shas["docs"], "succeeded", "done"), (shas["slow"], "succeeded", "done")]
    assert all(r["passed"] == 1 and r["benchmarks"] == 1 for r in rows)

    with sqlite3.connect(tmp_path / "data" / "roofwatch.db") as db:
        rounds = db.execute("SELECT n, json_array_length(samples) FROM measurement").fetchall()
    assert rounds and all(n >= 100_000 and kept == 1000 for n, kept in rounds)

    changes = json.loads(roofwatch(["regressions", "--repo", "acme/fastlib", "--format", "json"], env).stdout)
    assert len(changes) == 1, (rows, changes)
    [change] = changes
    assert (change["benchmark"], change["kind"], change["commit"]) == ("test_checksum", "perf-regression", shas["slow"])
    assert change["change_pct"] > 100

    # The confirmation A/B that stored it is listed on the overview, with its compare page.
    from fastapi.testclient import TestClient

    from roofwatch.service.api.app import create_app

    client = TestClient(create_app())
    overview = client.get("/").text
    assert "Recent comparisons" in overview and 'href="/compare/1"' in overview
    assert client.get("/compare/1").status_code == 200
