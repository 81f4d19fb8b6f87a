"""The suite-``env`` escape through a real worker: Redis as broker, PostgreSQL as database.

The GPU worker runs the sandbox (bubblewrap) and holds no database credentials; the commit's
``PATH`` would find its own ``bin/bwrap`` first. The script never runs on the host, the suite
runs inside the sandbox and passes, the run is stored, and the same worker measures the next
repository's commit as well.
"""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from support.environment import fresh_postgres_database
from support.tests_support import roofwatch
from support.worker_support import PrivateRedis, WorkerProcess, suite_repo, wait_for

from roofwatch.common.device import probe
from roofwatch.common.task_names import queue_name
from roofwatch.workers import bubblewrap

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

ESCAPING_SUITE = """
    kind = "correctness"
    command = "python -m pytest checks -q -p no:cacheprovider"
    env = { PATH = "bin:/usr/bin:/bin", SUITE_MARK = "inside" }
"""
PLAIN_SUITE = """
    kind = "correctness"
    command = "python -m pytest checks -q -p no:cacheprovider"
"""
CHECK = """
    import os

    def test_env_reaches_the_suite():
        assert os.environ["SUITE_MARK"] == "inside"
"""


def test_a_committed_bwrap_never_runs_on_a_worker_host(tmp_path: Path) -> None:
    bubblewrap.check()
    marker = tmp_path / "escaped-to-host"
    attacker = tmp_path / "attacker"
    suite_repo(attacker, {"correctness": ESCAPING_SUITE}, {
        "checks/test_env.py": CHECK,
        "bin/bwrap": f"#!/bin/sh\necho escaped > {marker}\nexec /usr/bin/bwrap \"$@\"\n"})
    (attacker / "bin" / "bwrap").chmod(0o755 | stat.S_IXUSR)
    subprocess.run(["git", "add", "-A"], cwd=attacker, check=True)
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=T", "commit", "-q", "-m", "exec bit"],
                   cwd=attacker, check=True)
    victim = tmp_path / "victim"
    suite_repo(victim, {"correctness": PLAIN_SUITE}, {"checks/test_env.py": "def test_ok():\n    assert True\n"})

    with fresh_postgres_database("roofwatch_env_escape", "the suite-env escape through a worker") as url:
        redis = PrivateRedis(tmp_path / "redis")
        redis.start()
        service = {"ROOFWATCH_DATA_DIR": str(tmp_path / "service"), "ROOFWATCH_BROKER_URL": redis.url,
                   "ROOFWATCH_DATABASE_URL": url}
        gpu_env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "gpu"), "ROOFWATCH_BROKER_URL": redis.url,
                   "ROOFWATCH_SANDBOX": "bubblewrap"}
        engine = create_engine(url)
        roofwatch(["db", "upgrade"], service)
        cpu = WorkerProcess(["--name", "cpu", "--queues", "cpu,ingest"], service, tmp_path / "cpu.log").start()
        gpu = WorkerProcess(["--name", "gpu0", "--queues", queue_name(probe().device_class)], gpu_env,
                            tmp_path / "gpu0.log").start()
        try:
            def finished(count: int) -> list[tuple[str, str]] | None:
                with engine.connect() as connection:
                    rows = [(str(r[0]), str(r[1] or "")) for r in
                            connection.execute(text("SELECT state, error FROM run ORDER BY id"))]
                return rows if len(rows) == count and all(s not in ("queued", "running") for s, _ in rows) else None

            roofwatch(["run", "--repo", str(attacker), "--rev", "HEAD", "--no-wait"], service, timeout=120)
            [(state, error)] = wait_for(lambda: finished(1), 300, "the attacker's run")  # type: ignore[misc]
            assert not marker.exists(), "the commit's bwrap ran on the worker host"
            assert state == "succeeded", error
            roofwatch(["run", "--repo", str(victim), "--rev", "HEAD", "--no-wait"], service, timeout=120)
            runs = wait_for(lambda: finished(2), 300, "the next repository's run")
            assert runs[1][0] == "succeeded", runs  # type: ignore[index]
            assert not marker.exists()
        finally:
            gpu.stop()
            cpu.stop()
            engine.dispose()
            redis.stop()
