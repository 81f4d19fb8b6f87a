"""Which worker holds which message, so a worker that dies mid-run loses nothing.

Tasks are acknowledged late: a message stays in kombu's ``unacked`` hash until its task has
returned. Kombu puts an unacknowledged message back on its queue only after the transport's
``visibility_timeout``, which has to be longer than the longest run (hours), or a slow run
would be handed to a second worker while the first still measures. So every worker records,
under its node name, the delivery tags it holds:

* a worker restarting under the same name (one name per GPU: ``gpu0@host``) requeues at once
  what its previous life held — two live workers never share a node name;
* ``recover_dead_workers`` (scheduled every minute) requeues what a worker held whose
  heartbeat has expired: its host died and did not come back.

A redelivered task finishes the same run (idempotency keys), and each start of a measuring
task is counted, so a run that kills its worker every time is rejected after
``MAX_ATTEMPTS`` instead of being redelivered forever.

All of this lives in the broker's Redis; with another broker (or none, in embedded mode)
the functions do nothing.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import redis
from celery import Celery

log = logging.getLogger(__name__)

HEARTBEAT_KEY = "roofwatch:worker:{node}"
INFLIGHT_KEY = "roofwatch:inflight:{node}"
ATTEMPTS_KEY = "roofwatch:attempts:{task_id}"
HEARTBEAT_INTERVAL_S = 10.0
# A worker silent for this long is dead: six missed beats, so a busy host is not mistaken.
HEARTBEAT_TTL_S = 60
ATTEMPTS_TTL_S = 7 * 24 * 3600
MAX_ATTEMPTS = 3


def client_for(broker_url: str | None) -> redis.Redis | None:
    """A Redis client for the broker, or None when the broker is not Redis."""
    if not broker_url or not broker_url.startswith(("redis://", "rediss://", "unix://")):
        return None
    return redis.Redis.from_url(broker_url, socket_timeout=5, socket_connect_timeout=5,
                                health_check_interval=30)


def count_attempt(client: redis.Redis | None, task_id: str) -> int:
    """Count one more start of ``task_id``; 1 on its first delivery (and without Redis)."""
    if client is None:
        return 1
    key = ATTEMPTS_KEY.format(task_id=task_id)
    pipe = client.pipeline()
    pipe.incr(key)
    pipe.expire(key, ATTEMPTS_TTL_S)
    attempts, _ = pipe.execute()
    return int(attempts)


def hold(client: redis.Redis, node: str, task_id: str, delivery_tag: str, name: str) -> None:
    """Record that ``node`` holds ``delivery_tag`` (still unacknowledged) for ``task_id``."""
    record = json.dumps({"delivery_tag": delivery_tag, "task": name, "since": time.time()})
    client.hset(INFLIGHT_KEY.format(node=node), task_id, record)


def release(client: redis.Redis, node: str, task_id: str) -> None:
    client.hdel(INFLIGHT_KEY.format(node=node), task_id)


def requeue_held(app: Celery, client: redis.Redis, node: str) -> list[str]:
    """Put every message ``node`` held back at the head of its queue; the task ids requeued.

    A tag kombu no longer has (acknowledged, or already restored after the visibility
    timeout) is skipped: restoring is a no-op for it.
    """
    key = INFLIGHT_KEY.format(node=node)
    held = client.hgetall(key)
    requeued: list[str] = []
    if not held:
        return requeued
    with app.connection_for_write() as connection:
        qos = connection.default_channel.qos
        for task_id, raw in held.items():
            tag = json.loads(raw)["delivery_tag"]
            if client.hexists("unacked", tag):
                qos.restore_by_tag(tag, leftmost=True)
                requeued.append(task_id.decode() if isinstance(task_id, bytes) else task_id)
            client.hdel(key, task_id)
    return requeued


def recover_dead_workers(app: Celery, client: redis.Redis) -> dict[str, list[str]]:
    """Requeue what workers without a live heartbeat held; node → task ids requeued."""
    recovered: dict[str, list[str]] = {}
    for key in client.scan_iter(match=INFLIGHT_KEY.format(node="*"), count=100):
        node = (key.decode() if isinstance(key, bytes) else key).split(":", 2)[2]
        if client.exists(HEARTBEAT_KEY.format(node=node)):
            continue
        requeued = requeue_held(app, client, node)
        if requeued:
            log.warning("worker %s stopped beating; requeued %s", node, ", ".join(requeued))
            recovered[node] = requeued
    return recovered


@dataclass
class Heartbeat:
    """Refreshes ``roofwatch:worker:<node>`` every few seconds from a daemon thread."""

    client: redis.Redis
    node: str
    device_class: str
    queues: list[str]
    started_at: float = field(default_factory=time.time)
    _stop: threading.Event = field(default_factory=threading.Event)

    def beat(self) -> None:
        held = self.client.hkeys(INFLIGHT_KEY.format(node=self.node))
        current = held[0].decode() if held and isinstance(held[0], bytes) else (held[0] if held else None)
        record = {"node": self.node, "device_class": self.device_class, "queues": self.queues,
                  "pid": os.getpid(), "started_at": self.started_at, "last_seen": time.time(),
                  "current_task": current}
        self.client.set(HEARTBEAT_KEY.format(node=self.node), json.dumps(record), ex=HEARTBEAT_TTL_S)

    def start(self) -> None:
        threading.Thread(target=self._run, name="roofwatch-heartbeat", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        try:
            self.client.delete(HEARTBEAT_KEY.format(node=self.node))
        except redis.RedisError:
            pass

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.beat()
            except redis.RedisError as exc:
                # The broker is away for a while; Celery reconnects on its own, and so do we.
                log.warning("heartbeat of %s not written: %s", self.node, exc)
            self._stop.wait(HEARTBEAT_INTERVAL_S)


def install(app: Celery, node: str, device_class: str, queues: list[str], broker_url: str | None) -> None:
    """Wire a worker process: requeue its previous life's messages, beat, track deliveries."""
    from celery import signals

    client = client_for(broker_url)
    if client is None:
        log.warning("broker is not Redis: a worker killed mid-run is recovered only by the broker's own redelivery")
        return
    heartbeat = Heartbeat(client, node, device_class, queues)

    @signals.worker_ready.connect(weak=False)
    def _on_ready(**_: Any) -> None:
        requeued = requeue_held(app, client, node)
        if requeued:
            log.warning("%s restarted: requeued what it held when it stopped: %s", node, ", ".join(requeued))
        heartbeat.start()

    @signals.worker_shutdown.connect(weak=False)
    def _on_shutdown(**_: Any) -> None:
        heartbeat.stop()

    @signals.task_received.connect(weak=False)
    def _on_received(request: Any = None, **_: Any) -> None:
        tag = getattr(getattr(request, "message", None), "delivery_tag", None)
        if request is not None and tag:
            try:
                hold(client, node, request.id, str(tag), request.name)
            except redis.RedisError as exc:
                log.warning("cannot record delivery of %s: %s", request.id, exc)

    @signals.task_postrun.connect(weak=False)
    def _on_postrun(task_id: str | None = None, **_: Any) -> None:
        if task_id:
            try:
                release(client, node, task_id)
            except redis.RedisError as exc:
                log.warning("cannot clear delivery of %s: %s", task_id, exc)
