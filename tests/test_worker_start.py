"""What a worker decides before it starts consuming: its name, its queues, what it may hold."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from roofwatch.service.core.config import get_settings
from roofwatch.workers import worker
from roofwatch.workers.device import probe, queue_name
from roofwatch.workers.settings import get_worker_settings


def test_gpu_worker_is_named_after_its_gpu_and_serves_only_its_queue() -> None:
    own = queue_name(probe().device_class)
    plan = worker.plan(gpu=1, queues=own, name=None)
    assert plan.name == "gpu1" and plan.queues == [own] and plan.gpu_only
    assert plan.node.startswith("gpu1@")


def test_default_worker_serves_device_cpu_and_ingest() -> None:
    plan = worker.plan(gpu=None, queues=None, name=None)
    assert plan.name == "main" and not plan.gpu_only
    assert plan.queues == [queue_name(probe().device_class), "cpu", "ingest"]
    assert worker.plan(gpu=None, queues="cpu,ingest", name=None).name == "cpu"
    assert worker.plan(gpu=None, queues="cpu", name="east").name == "east"


def test_gpu_only_worker_drops_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROOFWATCH_DATABASE_URL", "postgresql://roofwatch:secret@db/roofwatch")
    monkeypatch.setenv("ROOFWATCH_GITHUB_TOKEN", "ghp_secret")
    monkeypatch.setenv("ROOFWATCH_BROKER_URL", "redis://broker:6379/0")
    get_settings.cache_clear()
    assert get_settings().database_url is not None

    dropped = worker.drop_secrets()

    assert dropped == ["ROOFWATCH_DATABASE_URL", "ROOFWATCH_GITHUB_TOKEN"]
    assert "ROOFWATCH_DATABASE_URL" not in os.environ and "ROOFWATCH_GITHUB_TOKEN" not in os.environ
    assert get_worker_settings().broker_url == "redis://broker:6379/0"  # the broker is all it keeps
    get_settings.cache_clear()


def test_production_gpu_worker_starts_with_no_service_credentials() -> None:
    """A production GPU worker imports its Celery app and tasks holding only a broker URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROOFWATCH_")}
    env |= {"ROOFWATCH_ENVIRONMENT": "production", "ROOFWATCH_BROKER_URL": "redis://127.0.0.1:6379/9"}
    code = ("import sys, roofwatch.workers.celery_app, roofwatch.workers.tasks; "
            "print(sorted(m for m in sys.modules if m.startswith('service.') and 'analysis' not in m))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", "a worker imported service modules beyond the pure analysis"
