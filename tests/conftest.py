"""Shared fixtures: databases (SQLite always, PostgreSQL when reachable), sample repositories.

The tests are laid out like the code (``tests/analysis``, ``tests/records``… ``tests/e2e``); what
they share lives in the ``support`` package beside this file (``support/environment.py``: CI or
not, the PostgreSQL server, fresh databases).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# ``support`` (the helpers every folder of tests shares) is imported from here.
sys.path.insert(0, str(Path(__file__).parent))

from support.environment import IN_CI, SHARED, _reset_caches, fresh_postgres_database
from support.sample_repo import build_history
from support.tests_support import SUITE_PYTEST_ADDOPTS, SUITE_THREADS

# Suites run in this process (run_job, the embedded app's tasks) get what child processes get.
os.environ.setdefault("ROOFWATCH_SUITE_PYTEST_ADDOPTS", SUITE_PYTEST_ADDOPTS)
for _name, _value in SUITE_THREADS.items():
    os.environ.setdefault(_name, _value)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a fresh, empty PostgreSQL database for this test session."""
    with fresh_postgres_database("roofwatch_test", "the PostgreSQL tests (SQLite tests still run)") as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each DB test runs on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'roofwatch.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def roofwatch_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """An isolated embedded roofwatch: its own data dir, SQLite file and no broker."""
    data_dir = tmp_path / "data"
    monkeypatch.setenv("ROOFWATCH_DATA_DIR", str(data_dir))
    monkeypatch.delenv("ROOFWATCH_DATABASE_URL", raising=False)
    monkeypatch.delenv("ROOFWATCH_BROKER_URL", raising=False)
    _reset_caches()
    yield data_dir
    _reset_caches()


@pytest.fixture
def sample_history(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A git repository: good → broken correctness → fixed."""
    repo = tmp_path / "sample"
    return repo, build_history(repo)


@pytest.fixture
def shared_corpus() -> Path:
    if not SHARED.is_dir():
        if IN_CI:
            pytest.fail(f"{SHARED} is missing; CI runs with ../shared beside the clone")
        pytest.skip("../shared is absent; conformance tests need its corpus")
    return SHARED / "corpus"


@pytest.fixture(scope="session")
def seeded_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir whose SQLite database holds a real three-commit history (run once)."""
    from support.tests_support import roofwatch

    root = tmp_path_factory.mktemp("seeded")
    repo = root / "sample"
    shas = build_history(repo)
    env = {"ROOFWATCH_DATA_DIR": str(root / "data")}
    roofwatch(["repo", "add", "acme/kernels", "--clone-url", str(repo)], env)
    roofwatch(["run", "--repo", "acme/kernels", "--range", f"{shas['good']}..main", "--rev", shas["good"]],
              env, check=False)
    return root / "data"


@pytest.fixture
def seeded_app(seeded_data_dir: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The ASGI app over the seeded database."""
    monkeypatch.setenv("ROOFWATCH_DATA_DIR", str(seeded_data_dir))
    monkeypatch.delenv("ROOFWATCH_DATABASE_URL", raising=False)
    _reset_caches()
    from roofwatch.service.api.app import create_app

    yield create_app()
    _reset_caches()


# One Redis database per pytest-xdist worker (gw0 -> 15, gw1 -> 14, …): flushing is per test.
_XDIST_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
# A pytest this test session starts (a suite, a harness check) is not an xdist worker: with
# these inherited, pytest-benchmark would disable itself there.
for _name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
    os.environ.pop(_name, None)
REDIS_URL = os.environ.get("ROOFWATCH_TEST_REDIS", f"redis://127.0.0.1:6379/{15 - _XDIST_WORKER}")


@pytest.fixture
def redis_url() -> str:
    """A real Redis database for broker tests, emptied first."""
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    try:
        client.flushdb()
    except redis.exceptions.RedisError as exc:
        message = f"Redis not reachable at {REDIS_URL} ({exc})"
        if IN_CI:
            pytest.fail(message + " — CI must run the broker tests")
        pytest.skip(message + "; distributed-mode tests skipped, embedded mode still tested")
    finally:
        client.close()
    return REDIS_URL
from support.fake_github import fake_github  # noqa: E402,F401  (fixture: a fake GitHub REST server on loopback)
