"""Distributed mode under failure: real worker processes, a private Redis, real PostgreSQL.

A GPU worker (no database credentials) measures; a CPU worker ingests. Workers are
SIGKILLed mid-run, Redis is restarted during a run, PostgreSQL disappears for 10 s during
ingest, and suites crash, hang and flood their output. Every run ends recorded exactly once.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url
from support.environment import fresh_postgres_database
from support.tests_support import roofwatch
from support.worker_support import OutageProxy, PrivateRedis, WorkerProcess, suite_repo, wait_for

from roofwatch.common.device import probe
from roofwatch.common.task_names import queue_name

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

SLOW_SUITE = """
    kind = "correctness"
    command = "python -m pytest checks -q -p no:cacheprovider"
    timeout = 300
"""


def slow_check(markers: Path, seconds: float, gated: bool = False) -> str:
    """A test that leaves ``start-<pid>`` when it begins and ``done-<pid>`` when it ends; ``gated``, it
    also waits (up to a minute) for the test to leave ``release`` first, so what the test does between
    start and release happens while the suite runs however slow the host."""
    return f"""
        import os, time
        from pathlib import Path

        def test_takes_a_while():
            markers = Path({str(markers)!r})
            (markers / f"start-{{os.getpid()}}").touch()
            deadline = time.monotonic() + 60
            while {gated!r} and not (markers / "release").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep({seconds})
            (markers / f"done-{{os.getpid()}}").touch()
    """


@dataclass
class Cluster:
    root: Path
    redis: PrivateRedis
    database_url: str
    engine: Engine
    markers: Path

    @property
    def service_env(self) -> dict[str, str]:
        return {"ROOFWATCH_DATA_DIR": str(self.root / "service"), "ROOFWATCH_BROKER_URL": self.redis.url,
                "ROOFWATCH_DATABASE_URL": self.database_url}

    def cpu_worker(self, database_url: str | None = None) -> WorkerProcess:
        env = self.service_env | {"ROOFWATCH_DATABASE_URL": database_url or self.database_url}
        return WorkerProcess(["--name", "cpu", "--queues", "cpu,ingest"], env, self.root / "cpu.log").start()

    def gpu_worker(self) -> WorkerProcess:
        # Only the broker: a GPU worker never needs the database or GitHub.
        # The suites report start and end through marker files outside their worktree, which the
        # sandbox hides by design (tests/workers/test_hostile_suites.py proves that): unconfined here.
        env = {"ROOFWATCH_DATA_DIR": str(self.root / "gpu"), "ROOFWATCH_BROKER_URL": self.redis.url,
               "ROOFWATCH_SANDBOX": "unconfined"}
        queue = queue_name(probe().device_class)
        return WorkerProcess(["--name", "gpu0", "--queues", queue], env, self.root / "gpu0.log")

    def submit(self, repo: Path) -> None:
        roofwatch(["run", "--repo", str(repo), "--rev", "HEAD", "--no-wait"], self.service_env, timeout=120)

    def runs(self) -> list[tuple[int, str, str]]:
        with self.engine.connect() as connection:
            return [tuple(row) for row in connection.execute(text("SELECT id, state, error FROM run ORDER BY id"))]  # type: ignore[misc]

    def finished_run(self, timeout: float = 180) -> tuple[int, str, str]:
        def done() -> tuple[int, str, str] | None:
            runs = self.runs()
            return runs[0] if runs and runs[0][1] not in ("queued", "running") else None
        return wait_for(done, timeout, "the run to finish")  # type: ignore[return-value]

    def count(self, table: str, run_id: int) -> int:
        with self.engine.connect() as connection:
            return int(connection.execute(text(f"SELECT count(*) FROM {table} WHERE run_id = :r"), {"r": run_id}).scalar_one())

    def started(self) -> list[Path]:
        return sorted(self.markers.glob("start-*"))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with fresh_postgres_database("roofwatch_recovery", "the distributed recovery tests") as url:
        redis = PrivateRedis(tmp_path / "redis")
        redis.start()
        markers = tmp_path / "markers"
        markers.mkdir()
        engine = create_engine(url)
        cluster = Cluster(tmp_path, redis, url, engine, markers)
        roofwatch(["db", "upgrade"], cluster.service_env)
        try:
            yield cluster
        finally:
            engine.dispose()
            redis.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigkilled_worker_has_its_run_redelivered_and_completed_once(cluster: Cluster, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    suite_repo(repo, {"correctness": SLOW_SUITE}, {"checks/test_slow.py": slow_check(cluster.markers, 4)})
    cpu, gpu = cluster.cpu_worker(), cluster.gpu_worker().start()
    try:
        cluster.submit(repo)
        first = wait_for(cluster.started, 120, "the suite to start")[0]  # type: ignore[index]
        gpu.kill()
        suite_pid = int(first.name.split("-")[1])
        # The suite dies with its worker instead of running on, orphaned, on the GPU.
        wait_for(lambda: not _alive(suite_pid), 10, "the orphaned suite to die")
        gpu.start()
        run_id, state, error = cluster.finished_run()
    finally:
        gpu.stop()
        cpu.stop()
    assert state == "succeeded", error
    assert len(cluster.started()) == 2 and len(list(cluster.markers.glob("done-*"))) == 1
    assert cluster.count("suiteexecution", run_id) == 1
    assert cluster.count("testoutcome", run_id) == 1
    assert "requeued what it held" in (tmp_path / "gpu0.log").read_text()
    assert not (tmp_path / "gpu" / "roofwatch.db").exists(), "the GPU worker opened a database"


def test_a_run_that_keeps_killing_its_worker_is_rejected_after_three_attempts(cluster: Cluster, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    suite_repo(repo, {"correctness": SLOW_SUITE}, {"checks/test_slow.py": slow_check(cluster.markers, 30)})
    cpu, gpu = cluster.cpu_worker(), cluster.gpu_worker().start()
    try:
        cluster.submit(repo)
        for attempt in (1, 2, 3):
            wait_for(lambda: len(cluster.started()) == attempt, 120, f"attempt {attempt} to start")
            gpu.kill()
            gpu.start()
        run_id, state, error = cluster.finished_run()
    finally:
        gpu.stop()
        cpu.stop()
    assert state == "errored"
    assert "rejected after 3 attempts" in error
    assert len(cluster.started()) == 3


def test_redis_restart_during_a_run_loses_nothing(cluster: Cluster, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    suite_repo(repo, {"correctness": SLOW_SUITE}, {"checks/test_slow.py": slow_check(cluster.markers, 6)})
    cpu, gpu = cluster.cpu_worker(), cluster.gpu_worker().start()
    try:
        cluster.submit(repo)
        wait_for(cluster.started, 120, "the suite to start")
        cluster.redis.stop()
        threading.Event().wait(3)
        cluster.redis.start()
        run_id, state, error = cluster.finished_run()
    finally:
        gpu.stop()
        cpu.stop()
    assert state == "succeeded", error
    assert cluster.count("suiteexecution", run_id) == 1
    assert cluster.count("testoutcome", run_id) == 1


def test_postgres_outage_during_ingest_is_retried(cluster: Cluster, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    suite_repo(repo, {"correctness": SLOW_SUITE}, {"checks/test_slow.py": slow_check(cluster.markers, 1, gated=True)})
    target = make_url(cluster.database_url)
    proxy = OutageProxy((target.host or "127.0.0.1", target.port or 5432))
    through_proxy = target.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    cpu, gpu = cluster.cpu_worker(database_url=through_proxy), cluster.gpu_worker().start()
    try:
        cluster.submit(repo)
        wait_for(cluster.started, 120, "the suite to start")
        # The envelope reaches the ingest queue while the database is away: 10 s at least, and on
        # until the ingest worker has tried it (a busy host may take longer than 10 s to get there).
        # The suite waits for the release, so the outage has begun before anything is ingested.
        proxy.outage(10, until_refused=1, begun=(cluster.markers / "release").touch)
        run_id, state, error = cluster.finished_run()
    finally:
        gpu.stop()
        cpu.stop()
    assert state == "succeeded", error
    assert cluster.count("suiteexecution", run_id) == 1
    assert cluster.count("testoutcome", run_id) == 1
    assert "retry" in (tmp_path / "cpu.log").read_text().lower()


FLOOD = """
    import sys
    import pytest

    sys.stdout.write("x" * 100_000_000)
    sys.stdout.flush()
    sys.exit(pytest.main(["checks/test_env.py", "-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
"""

ENV_CHECK = """
    import os

    def test_no_service_secrets_reach_the_suite():
        # ROOFWATCH_SETUP_CACHE is the suite's own (read-only) setup cache, not a secret.
        leaked = sorted(k for k in os.environ if k.startswith(("ROOFWATCH_", "GITHUB_", "AWS_")))
        assert leaked in ([], ["ROOFWATCH_SETUP_CACHE"])
        assert os.environ["HOME"] != os.path.expanduser("~root")
"""


def test_crashing_hanging_and_flooding_suites_are_recorded_and_the_worker_survives(
        cluster: Cluster, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    suite_repo(repo, {
        "segfault": 'kind = "correctness"\ncommand = "python -c \'import ctypes; ctypes.string_at(0)\'"',
        "hang": 'kind = "correctness"\ncommand = "python -c \'import time; time.sleep(3600)\'"\ntimeout = 3',
        "flood": 'kind = "correctness"\ncommand = "python flood.py"\ntimeout = 120',
        "secrets": 'kind = "correctness"\ncommand = "python -m pytest checks/test_env.py -q -p no:cacheprovider"',
    }, {"flood.py": FLOOD, "checks/test_env.py": ENV_CHECK})
    # One worker serving every queue, holding the service's secrets as a single-host install does.
    env = cluster.service_env | {"ROOFWATCH_GITHUB_TOKEN": "ghp_not_for_suites",
                                 "ROOFWATCH_API_TOKEN": "not-for-suites", "AWS_SECRET_ACCESS_KEY": "nope"}
    worker = WorkerProcess([], env, tmp_path / "main.log").start()
    try:
        cluster.submit(repo)
        run_id, state, _ = cluster.finished_run()
        alive = worker.process is not None and worker.process.poll() is None
    finally:
        worker.stop()
    assert alive, "the worker died with its suites"
    assert state == "errored"
    with cluster.engine.connect() as connection:
        suites = {name: (status, reason, tail) for name, status, reason, tail in connection.execute(text(
            "SELECT name, status, reason, output_tail FROM suiteexecution WHERE run_id = :r"), {"r": run_id})}
    assert suites["segfault"][0] == "errored" and suites["segfault"][1].startswith("crashed (SIGSEGV)")
    assert suites["hang"][0] == "timeout" and "timed out after 3 s" in suites["hang"][1]
    assert suites["flood"][0] == "passed" and "bytes of output dropped" in suites["flood"][2], suites["flood"]
    assert suites["secrets"][0] == "passed", suites["secrets"][2]


def test_revoked_run_stops_its_suite_and_stays_revoked_across_a_restart(cluster: Cluster, tmp_path: Path) -> None:
    """What superseding a pull request's older head relies on: revoke(terminate=True)."""
    from celery import Celery

    from roofwatch.service.flows.dispatch import task_id_for_run

    repo = tmp_path / "repo"
    suite_repo(repo, {"correctness": SLOW_SUITE}, {"checks/test_slow.py": slow_check(cluster.markers, 60)})
    cpu, gpu = cluster.cpu_worker(), cluster.gpu_worker().start()
    control = Celery(broker=cluster.redis.url)
    try:
        cluster.submit(repo)
        first = wait_for(cluster.started, 120, "the suite to start")[0]  # type: ignore[index]
        run_id = cluster.runs()[0][0]
        control.control.revoke(task_id_for_run(run_id), terminate=True)
        suite_pid = int(first.name.split("-")[1])
        wait_for(lambda: not _alive(suite_pid), 20, "the revoked run's suite to stop")
        gpu.kill()
        gpu.start()
        threading.Event().wait(8)
    finally:
        gpu.stop()
        cpu.stop()
        control.close()
    assert len(cluster.started()) == 1, "a revoked run was measured again"
