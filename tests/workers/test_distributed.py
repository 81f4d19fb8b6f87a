"""Distributed mode: the same chain through a real Redis broker and a real worker process."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.tests_support import ROOFWATCH, child_env, roofwatch


@pytest.fixture
def worker(redis_url: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_BROKER_URL": redis_url}
    roofwatch(["db", "upgrade"], env)
    full_env = child_env(env)
    log = open(tmp_path / "worker.log", "w")
    process = subprocess.Popen([str(ROOFWATCH), "worker", "--loglevel", "warning"], env=full_env,
                               stdout=log, stderr=subprocess.STDOUT)
    time.sleep(1)
    try:
        yield env
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def test_run_through_the_broker_matches_embedded_mode(
    worker: dict[str, str], sample_history: tuple[Path, dict[str, str]]
) -> None:
    repo, shas = sample_history
    done = roofwatch(["run", "--repo", str(repo), "--last", "3"], worker, check=False, timeout=300)
    assert "queue gpu." in done.stdout
    assert done.returncode == 1, done.stdout + done.stderr  # the broken commit fails
    changes = roofwatch(["regressions", "--format", "json"], worker).stdout
    assert shas["broken"] in changes and "correctness-failure" in changes
