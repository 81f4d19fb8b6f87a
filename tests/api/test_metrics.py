"""``GET /metrics``: values read from the database (SQLite and PostgreSQL) and a real Redis broker.

The output is parsed with prometheus_client's own parser and checked value by value.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families
from sqlmodel import Session
from support.environment import _reset_caches

from roofwatch.common.vocabulary import RUN_STATES
from roofwatch.service.core.db import downgrade, make_engine, migrate
from roofwatch.service.core.models import Commit, Device, GitHubReport, Repository, Run, WebhookDelivery, utcnow

Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


def scrape(client: TestClient) -> Samples:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"] == CONTENT_TYPE_LATEST
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[name][tuple(sorted(labels.items()))]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def seed(url: str) -> None:
    """Runs in several states, two finished within the last day; the outbox; webhook deliveries."""
    now = utcnow()
    engine = make_engine(url)
    with Session(engine) as session:
        repository = Repository(full_name="acme/kernels", clone_url="/nowhere")
        session.add(repository)
        session.add(Device(fingerprint="f" * 64, device_class="NVIDIA H100", hostname="gpu-7", environment_shifts=3))
        session.flush()
        commit = Commit(repository_id=repository.id, sha="a" * 40)  # type: ignore[arg-type]
        session.add(commit)
        session.flush()

        def run(key: str, state: str, started_ago: float | None = None, took: float | None = None) -> Run:
            started = now - timedelta(seconds=started_ago) if started_ago is not None else None
            finished = started + timedelta(seconds=took) if started is not None and took is not None else None
            return Run(repository_id=repository.id, commit_id=commit.id, state=state, idempotency_key=key,  # type: ignore[arg-type]
                       started_at=started, finished_at=finished)

        session.add_all([
            run("q1", "queued"), run("q2", "queued"),
            run("r1", "running", started_ago=100),
            run("s1", "succeeded", started_ago=3600, took=30),
            run("s2", "succeeded", started_ago=3 * 3600, took=2 * 3600),
            run("f-old", "failed", started_ago=3 * 86400, took=600),  # finished two days ago: not in the histogram
            run("c1", "cancelled"),
        ])
        session.add_all([
            GitHubReport(repository_id=repository.id, target="status", subject="a" * 40,  # type: ignore[arg-type]
                         version=2, delivered_version=1),
            GitHubReport(repository_id=repository.id, target="comment", subject="7",  # type: ignore[arg-type]
                         version=3, delivered_version=3),
            GitHubReport(repository_id=repository.id, target="check_run", subject="b" * 40),  # type: ignore[arg-type]
        ])
        session.add_all([
            WebhookDelivery(delivery_id="d1", event="push", outcome="accepted"),
            WebhookDelivery(delivery_id="d2", event="pull_request", outcome="accepted"),
            WebhookDelivery(delivery_id="d3", event="ping", outcome="ignored"),
            WebhookDelivery(delivery_id="d4", event="push", outcome="failed", received_at=now - timedelta(days=2)),
        ])
        session.commit()
    engine.dispose()


@pytest.fixture
def metrics_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[pytest.MonkeyPatch]:
    """An empty environment: no broker, a private data dir, an API token (that /metrics must not ask for)."""
    monkeypatch.setenv("ROOFWATCH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("ROOFWATCH_DATABASE_URL", raising=False)
    monkeypatch.delenv("ROOFWATCH_BROKER_URL", raising=False)
    monkeypatch.setenv("ROOFWATCH_API_TOKEN", "s3cret")
    _reset_caches()
    yield monkeypatch
    _reset_caches()


def client_for(monkeypatch: pytest.MonkeyPatch, database_url: str | None = None,
               broker_url: str | None = None) -> TestClient:
    if database_url:
        monkeypatch.setenv("ROOFWATCH_DATABASE_URL", database_url)
    if broker_url:
        monkeypatch.setenv("ROOFWATCH_BROKER_URL", broker_url)
    _reset_caches()
    from roofwatch.service.api.app import create_app

    return TestClient(create_app())


def test_database_metrics(database_url: str, metrics_env: pytest.MonkeyPatch) -> None:
    if database_url.startswith("postgresql"):
        downgrade(database_url, "base")  # the session's PostgreSQL database is shared between tests
    migrate(database_url)
    seed(database_url)
    samples = scrape(client_for(metrics_env, database_url))  # no Authorization header

    assert value(samples, "roofwatch_database_up") == 1
    expected = {"queued": 2, "running": 1, "succeeded": 2, "failed": 1, "cancelled": 1}
    assert {state: value(samples, "roofwatch_runs", state=state) for state in RUN_STATES} == {
        state: expected.get(state, 0) for state in RUN_STATES}

    # Two runs finished in the last 24 h: 30 s and 2 h.
    assert value(samples, "roofwatch_run_duration_seconds_count") == 2
    assert value(samples, "roofwatch_run_duration_seconds_sum") == pytest.approx(30 + 7200)
    buckets = {dict(labels)["le"]: v for labels, v in samples["roofwatch_run_duration_seconds_bucket"].items()}
    assert buckets["1.0"] == 0 and buckets["30.0"] == 1 and buckets["3600.0"] == 1
    assert buckets["7200.0"] == 2 and buckets["14400.0"] == 2 and buckets["+Inf"] == 2

    assert value(samples, "roofwatch_github_reports_pending") == 2  # version 2 of 1, and a new one
    assert value(samples, "roofwatch_webhook_deliveries", outcome="accepted") == 2
    assert value(samples, "roofwatch_webhook_deliveries", outcome="ignored") == 1
    assert value(samples, "roofwatch_webhook_deliveries", outcome="failed") == 0  # two days old
    assert value(samples, "roofwatch_device_environment_shifts", device_class="NVIDIA H100", hostname="gpu-7",
                 fingerprint="f" * 12) == 3

    # Embedded mode: no broker, so nothing about one (not even "down").
    assert not any(name.startswith(("roofwatch_broker", "roofwatch_queue", "roofwatch_worker")) for name in samples)


def heartbeat(node: str, device_class: str, queues: list[str], last_seen: float, task: str | None) -> str:
    return json.dumps({"node": node, "device_class": device_class, "queues": queues, "pid": 4242,
                       "started_at": last_seen - 3600, "last_seen": last_seen, "current_task": task})


def test_broker_metrics(redis_url: str, metrics_env: pytest.MonkeyPatch, tmp_path: Any) -> None:
    import redis

    database_url = f"sqlite:///{tmp_path / 'roofwatch.db'}"
    migrate(database_url)
    client = client_for(metrics_env, database_url, redis_url)
    now = time.time()
    broker = redis.Redis.from_url(redis_url)
    try:
        broker.set("roofwatch:worker:roofwatch-101@gpu-a", heartbeat(
            "roofwatch-101@gpu-a", "NVIDIA H200", ["gpu.nvidia-h200", "cpu", "ingest"], now - 4, "task-1"), ex=60)
        broker.set("roofwatch:worker:roofwatch-102@gpu-b", heartbeat(
            "roofwatch-102@gpu-b", "NVIDIA L4", ["gpu.nvidia-l4"], now - 8, None), ex=60)
        broker.set("roofwatch:worker:roofwatch-103@gpu-c", heartbeat(
            "roofwatch-103@gpu-c", "NVIDIA H200", ["gpu.nvidia-h200"], now - 1, None), ex=60)
        broker.set("roofwatch:worker:garbage", "not json", ex=60)

        # Real Celery messages: one routed to `cpu`, two to an H200 queue (one at a priority, which
        # Redis keeps in a list of its own).
        from roofwatch.common.celery_app import make_app

        celery = make_app()
        celery.send_task("roofwatch.analyze", args=[1])
        celery.send_task("roofwatch.run_commit", args=[{"run_id": 1}], queue="gpu.nvidia-h200")
        celery.send_task("roofwatch.run_commit", args=[{"run_id": 2}], queue="gpu.nvidia-h200", priority=9)
        celery.close()
        # A queue no live worker advertises is found by its lists.
        broker.lpush("gpu.nvidia-a100", "m1", "m2")
        broker.lpush("gpu.nvidia-a100\x06\x163", "m3")
        broker.hset("unacked", mapping={"tag-1": "{}", "tag-2": "{}"})

        samples = scrape(client)
    finally:
        broker.close()

    assert value(samples, "roofwatch_broker_up") == 1
    assert value(samples, "roofwatch_database_up") == 1
    assert samples["roofwatch_queue_depth"] == {
        (("queue", "cpu"),): 1, (("queue", "ingest"),): 0, (("queue", "gpu.nvidia-h200"),): 2,
        (("queue", "gpu.nvidia-l4"),): 0, (("queue", "gpu.nvidia-a100"),): 3}
    assert value(samples, "roofwatch_unacked_messages") == 2

    a = {"node": "roofwatch-101@gpu-a", "device_class": "NVIDIA H200"}
    b = {"node": "roofwatch-102@gpu-b", "device_class": "NVIDIA L4"}
    c = {"node": "roofwatch-103@gpu-c", "device_class": "NVIDIA H200"}
    assert value(samples, "roofwatch_worker_last_seen_timestamp_seconds", **a) == pytest.approx(now - 4)
    assert value(samples, "roofwatch_worker_last_seen_timestamp_seconds", **b) == pytest.approx(now - 8)
    assert {dict(labels)["node"]: v for labels, v in samples["roofwatch_worker_busy"].items()} == {
        a["node"]: 1, b["node"]: 0, c["node"]: 0}
    assert samples["roofwatch_workers"] == {(("device_class", "NVIDIA H200"),): 2, (("device_class", "NVIDIA L4"),): 1}


def test_broker_down_is_reported_not_fatal(metrics_env: pytest.MonkeyPatch, tmp_path: Any) -> None:
    database_url = f"sqlite:///{tmp_path / 'roofwatch.db'}"
    migrate(database_url)
    client = client_for(metrics_env, database_url, f"redis://127.0.0.1:{closed_port()}/0")
    started = time.monotonic()
    samples = scrape(client)
    assert time.monotonic() - started < 5
    assert value(samples, "roofwatch_broker_up") == 0
    assert value(samples, "roofwatch_database_up") == 1
    assert value(samples, "roofwatch_runs", state="queued") == 0
    assert not any(name.startswith(("roofwatch_queue", "roofwatch_worker", "roofwatch_unacked")) for name in samples)


def test_database_down_is_reported_not_fatal(metrics_env: pytest.MonkeyPatch) -> None:
    client = client_for(metrics_env, f"postgresql://roofwatch@127.0.0.1:{closed_port()}/roofwatch",
                        f"redis://127.0.0.1:{closed_port()}/0")
    samples = scrape(client)
    assert value(samples, "roofwatch_database_up") == 0 and value(samples, "roofwatch_broker_up") == 0
    assert set(samples) == {"roofwatch_database_up", "roofwatch_broker_up"}
