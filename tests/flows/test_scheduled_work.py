"""What beat schedules and what workers announce: nightly runs, dead-worker recovery, devices, lost runs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import redis
from celery import Celery
from sqlmodel import select

from roofwatch.common import redelivery
from roofwatch.common.device import probe
from roofwatch.common.vocabulary import Trigger
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.models import Device, Repository, Run, utcnow
from roofwatch.service.flows import nightly
from roofwatch.service.records.repositories import register
from roofwatch.service.records.runs import history_runs, is_history_run


def _register(name: str, clone_url: str, branch: str = "main") -> None:
    with session_scope() as session:
        register(session, name, clone_url, default_branch=branch)


def test_nightly_run_measures_each_default_branch_once_a_night(
        roofwatch_env: Path, sample_history: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    from roofwatch.service.core.db import migrate

    migrate()
    repo, shas = sample_history
    _register("acme/kernels", str(repo))
    _register("acme/gone", str(tmp_path / "no-such-repository"))
    night = utcnow().date()

    started = nightly.start_all(night)
    assert isinstance(started["acme/kernels"], int)
    assert str(started["acme/gone"]).startswith("not started:")  # one bad repository stops no other
    with session_scope() as session:
        run = session.get(Run, started["acme/kernels"])
        assert run is not None and run.trigger == Trigger.SCHEDULE and run.state == "succeeded"
        assert run.idempotency_key.endswith(f":nightly:{night.isoformat()}")
        # a point of the branch's history, as DESIGN.md's "schedule" trigger is (stored as "nightly", it was none)
        assert is_history_run(run)
        assert session.exec(select(Run.id).where(Run.id == run.id, history_runs())).first() == run.id

    again = nightly.start_all(night)
    assert again["acme/kernels"] == "already started tonight"
    with session_scope() as session:
        assert len(session.exec(select(Run).where(Run.trigger == Trigger.SCHEDULE)).all()) == 1


def test_a_worker_announces_its_device_before_any_run(roofwatch_env: Path) -> None:
    from roofwatch.service.core.db import migrate
    from roofwatch.service.tasks import register_device

    migrate()
    info = probe()
    device_id = register_device.delay(info.model_dump(mode="json")).get()
    assert register_device.delay(info.model_dump(mode="json")).get() == device_id  # idempotent
    with session_scope() as session:
        device = session.get(Device, device_id)
        assert device is not None and device.fingerprint == info.fingerprint


def test_a_lost_measuring_task_errors_its_run_instead_of_leaving_it_running(
        roofwatch_env: Path, sample_history: tuple[Path, dict[str, str]]) -> None:
    from roofwatch.git import checkout
    from roofwatch.service.core.db import migrate
    from roofwatch.service.flows.dispatch import task_id_for_run
    from roofwatch.service.records.runs import create_run, upsert_commit
    from roofwatch.service.tasks import measuring_lost

    migrate()
    repo, shas = sample_history
    _register("acme/kernels", str(repo))
    with session_scope() as session:
        repository = session.exec(select(Repository)).one()
        commit = upsert_commit(session, repository, checkout.commit_info(repo, shas["good"]))
        run = create_run(session, repository, commit, "lost-run-key")
        run.state = "running"
        session.add(run)
        run_id = run.id
    assert run_id is not None
    measuring_lost.delay(task_id_for_run(run_id)).get()
    with session_scope() as session:
        run = session.get(Run, run_id)
        assert run is not None and run.state == "errored" and "measuring task was lost" in run.error


@pytest.mark.redis
def test_work_held_by_a_worker_whose_heartbeat_stopped_is_requeued(redis_url: str) -> None:
    app = Celery(broker=redis_url)
    client = redis.Redis.from_url(redis_url)
    with app.connection_for_write() as connection:
        queue = connection.SimpleQueue("roofwatch-test-recovery")
        queue.put({"run": 7})
        queue.put({"run": 8})
        dead = queue.get(timeout=5)   # delivered, never acknowledged: it sits in kombu's unacked hash
        alive = queue.get(timeout=5)
        redelivery.hold(client, "gpu3@lost-host", "task-7", dead.delivery_tag, "roofwatch.run_commit")
        redelivery.hold(client, "gpu4@live-host", "task-8", alive.delivery_tag, "roofwatch.run_commit")
        redelivery.Heartbeat(client, "gpu4@live-host", "CPU", ["gpu.cpu"]).beat()

        recovered = redelivery.recover_dead_workers(app, client)

        assert recovered == {"gpu3@lost-host": ["task-7"]}
        again = queue.get(timeout=5)
        assert again.payload == {"run": 7}
        again.ack()
        assert client.hexists(redelivery.INFLIGHT_KEY.format(node="gpu4@live-host"), "task-8")
        alive.ack()
        queue.close()
    beat = json.loads(client.get(redelivery.HEARTBEAT_KEY.format(node="gpu4@live-host")) or "{}")
    assert beat["current_task"] == "task-8" and beat["last_seen"] <= time.time()
    assert 0 < client.ttl(redelivery.HEARTBEAT_KEY.format(node="gpu4@live-host")) <= redelivery.HEARTBEAT_TTL_S


@pytest.mark.redis
def test_attempts_are_counted_per_task(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    assert [redelivery.count_attempt(client, "task-x") for _ in range(4)] == [1, 2, 3, 4]
    assert redelivery.count_attempt(client, "task-y") == 1
    assert redelivery.count_attempt(None, "task-z") == 1  # no Redis broker: nothing to count
