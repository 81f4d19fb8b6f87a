"""A dependency bump is measured as the commit pins it, and named when it moves a number.

Two local wheels of one dependency: 1.0 sleeps 20 ms, 2.0 sleeps 40 ms. The repository's
benchmark suite declares its own environment from ``requirements.txt``; commit 2 bumps the pin.
Each commit is measured in an environment built from its own pin (offline, from the wheel folder),
the slowdown is confirmed at commit 2, and the change says the environment moved under it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from support.sample_repo import commit, init
from support.tests_support import roofwatch
from support.wheels import build_wheel

PYPROJECT = """\
[project]
name = "pinned-kernels"
version = "0.0.1"

[tool.roofwatch]
min_effect = "20%"

[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest bench -q -p no:cacheprovider --benchmark-only --benchmark-min-rounds=5 --benchmark-max-time=0.02 --benchmark-warmup=off"
environment = { requirements = ["requirements.txt"] }
"""
BENCH = "import slowdep\n\n\ndef test_work(benchmark):\n    benchmark(slowdep.work)\n"


def test_a_pinned_dependency_bump_is_measured_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheels = tmp_path / "wheels"
    for version, seconds in (("1.0", 0.02), ("2.0", 0.04)):
        build_wheel(wheels, "slowdep", version,
                    {"slowdep/__init__.py": f"import time\n\n\ndef work():\n    time.sleep({seconds})\n"})
    repo = tmp_path / "repo"
    init(repo)
    first = commit(repo, "pin slowdep 1.0", {"pyproject.toml": PYPROJECT, "requirements.txt": "slowdep==1.0\n",
                                             "bench/test_work.py": BENCH}, 1)
    second = commit(repo, "bump slowdep to 2.0", {"requirements.txt": "slowdep==2.0\n"}, 2)
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'rw.db'}",
           "ROOFWATCH_WHEEL_DIR": str(wheels), "ROOFWATCH_AB_MAX_ROUNDS": "6"}
    roofwatch(["run", "--repo", str(repo), "--last", "2"], env)

    found = json.loads(roofwatch(["regressions", "--repo", str(repo), "--format", "json"], env).stdout)
    assert [(c["kind"], c["benchmark"], c["commit"]) for c in found] == [("perf-regression", "test_work", second)]
    assert found[0]["environment_change"] == ["slowdep 1.0 → 2.0"] and found[0]["change_pct"] > 50

    done = roofwatch(["compare", first, second, "--repo", str(repo), "--format", "json"], env, check=False)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["environment_changes"] == {"benchmarks": ["slowdep 1.0 → 2.0"]}

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    from support.environment import _reset_caches

    _reset_caches()
    from roofwatch.service.api.app import create_app

    with TestClient(create_app()) as client:
        page = client.get("/runs/2")
        assert page.status_code == 200 and "Environments" in page.text and "slowdep 2.0" in page.text
        assert "commit's own environment" in client.get("/benchmarks/1").text
    _reset_caches()
