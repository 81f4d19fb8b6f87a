"""What a worker decides before it starts consuming: its name, its queues, what it may hold."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

from roofwatch.common.device import probe
from roofwatch.common.settings import get_worker_settings
from roofwatch.common.task_names import queue_name
from roofwatch.service.core.config import get_settings
from roofwatch.workers import worker


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


SERVICE_LOADED = "sorted(m for m in sys.modules if m.startswith('roofwatch.service.'))"


def _loaded_by(code: str) -> list[str]:
    """The service modules a fresh production process holds after ``code`` (not even the pure analysis:
    what a worker shares with the service stands on a neutral floor)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROOFWATCH_")}
    env |= {"ROOFWATCH_ENVIRONMENT": "production", "ROOFWATCH_BROKER_URL": "redis://127.0.0.1:6379/9"}
    done = subprocess.run([sys.executable, "-c", f"import sys; {code}; print({SERVICE_LOADED})"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded: list[str] = ast.literal_eval(done.stdout.strip())
    return loaded


def test_production_gpu_worker_starts_with_no_service_credentials() -> None:
    """A production GPU worker imports its Celery app and tasks holding only a broker URL, and no service module."""
    assert _loaded_by("import roofwatch.common.celery_app, roofwatch.workers.tasks") == []


def test_a_gpu_only_worker_registers_its_own_task_module_and_loads_no_service_module() -> None:
    """What Celery imports at a worker's start (its ``include``) is decided by the queues it serves."""
    from roofwatch.common.celery_app import SERVICE_TASKS, WORKER_TASKS, task_modules

    gpu_only = task_modules(["gpu.nvidia-h200"])
    assert gpu_only == [WORKER_TASKS]
    assert task_modules(["gpu.nvidia-h200", "cpu", "ingest"]) == [WORKER_TASKS, SERVICE_TASKS]
    assert task_modules(["ingest"]) == [WORKER_TASKS, SERVICE_TASKS]
    assert _loaded_by("from roofwatch.common.celery_app import app, task_modules; "
                      "app.conf.include = task_modules(['gpu.nvidia-h200']); app.loader.import_default_modules()") == []
    # The guard can fail: with the service's task module included, the service comes along.
    assert "roofwatch.service.tasks" in _loaded_by(
        "from roofwatch.common.celery_app import app; app.loader.import_default_modules()")
