"""``GET /metrics``: Prometheus text format, read from the database and the broker at scrape time.

Nothing is counted in process memory: a collector queries the current state on every scrape, so
any number of API processes give the same answer and a restart loses nothing. A database or broker
that cannot be reached is reported as ``roofwatch_database_up 0`` / ``roofwatch_broker_up 0`` and
the metrics drawn from it are left out; the endpoint itself still answers 200. In embedded mode
(no broker) there are no broker metrics at all, ``roofwatch_broker_up`` included.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta

import redis
from fastapi import APIRouter, Response
from fastapi.responses import PlainTextResponse
from kombu.transport.redis import PRIORITY_STEPS, Channel
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString
from redis.backoff import NoBackoff
from redis.retry import Retry
from sqlalchemy import Engine, func, text
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, col, select

from roofwatch.common.celery_app import CPU_QUEUE, INGEST_QUEUE
from roofwatch.common.redelivery import HEARTBEAT_KEY
from roofwatch.common.vocabulary import RUN_STATES
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.db import get_engine
from roofwatch.service.core.models import DELIVERY_OUTCOMES, Device, GitHubReport, Run, WebhookDelivery, utcnow

log = logging.getLogger(__name__)

WINDOW = timedelta(hours=24)
# Suites on a GPU take from seconds (a smoke test) to hours (a full sweep); the hard limit is 4 h.
DURATION_BUCKETS_S = (1, 5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400)
BROKER_TIMEOUT_S = 2.0
DATABASE_TIMEOUT_MS = 2000
# Workers refresh ``roofwatch:worker:<node name>`` (JSON, 60 s TTL) every 10 s.
WORKER_KEY_PREFIX = HEARTBEAT_KEY.format(node="")
GPU_QUEUE_PATTERN = "gpu.*"


@dataclass(frozen=True)
class Heartbeat:
    node: str
    device_class: str
    queues: tuple[str, ...]
    last_seen: float
    busy: bool


def parse_heartbeat(key: str, raw: bytes | str | None) -> Heartbeat | None:
    """A worker's heartbeat record; None for one that is missing or malformed."""
    try:
        data = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    last_seen, queues = data.get("last_seen"), data.get("queues") or []
    if not isinstance(last_seen, int | float) or isinstance(last_seen, bool) or not isinstance(queues, list):
        return None
    node = data.get("node") if isinstance(data.get("node"), str) else key.removeprefix(WORKER_KEY_PREFIX)
    device_class = data.get("device_class") if isinstance(data.get("device_class"), str) else ""
    return Heartbeat(node=str(node), device_class=str(device_class),
                     queues=tuple(q for q in queues if isinstance(q, str) and q),
                     last_seen=float(last_seen), busy=bool(data.get("current_task")))


def duration_histogram(durations: Iterable[float]) -> HistogramMetricFamily:
    """Cumulative buckets over run durations, in seconds."""
    values = [max(0.0, d) for d in durations]
    buckets = [(floatToGoString(le), float(sum(v <= le for v in values))) for le in DURATION_BUCKETS_S]
    buckets.append(("+Inf", float(len(values))))
    return HistogramMetricFamily("roofwatch_run_duration_seconds",
                                 "Wall time (finished_at - started_at) of the runs finished in the last 24 h",
                                 buckets=buckets, sum_value=sum(values))


def database_metrics(engine: Engine) -> list[Metric]:
    """Run states, run durations, the GitHub outbox and webhook deliveries; raises SQLAlchemyError."""
    since = utcnow() - WINDOW
    with Session(engine) as session:
        if engine.dialect.name == "postgresql":  # a slow scrape must not pile up on a busy database
            session.exec(text(f"SET LOCAL statement_timeout = {DATABASE_TIMEOUT_MS}"))  # type: ignore[call-overload]
        states = dict(session.exec(select(Run.state, func.count()).group_by(col(Run.state))).all())
        spans = session.exec(select(Run.started_at, Run.finished_at).where(
            col(Run.finished_at) >= since, col(Run.started_at).is_not(None))).all()
        pending = session.exec(select(func.count()).select_from(GitHubReport).where(
            col(GitHubReport.delivered_version) < col(GitHubReport.version))).one()
        deliveries = dict(session.exec(select(WebhookDelivery.outcome, func.count()).where(
            col(WebhookDelivery.received_at) >= since).group_by(col(WebhookDelivery.outcome))).all())
        shifts = session.exec(select(Device.device_class, Device.hostname, Device.fingerprint,
                                     Device.environment_shifts)).all()

    runs = GaugeMetricFamily("roofwatch_runs", "Runs in each state", labels=["state"])
    for state in dict.fromkeys([*RUN_STATES, *sorted(states)]):
        runs.add_metric([state], states.get(state, 0))
    reports = GaugeMetricFamily("roofwatch_github_reports_pending",
                                "Statuses, check runs and comments whose newest version GitHub does not show yet",
                                value=pending)
    webhooks = GaugeMetricFamily("roofwatch_webhook_deliveries", "Webhook deliveries received in the last 24 h",
                                 labels=["outcome"])
    for outcome in dict.fromkeys([*DELIVERY_OUTCOMES, *sorted(deliveries)]):
        webhooks.add_metric([outcome or "unknown"], deliveries.get(outcome, 0))
    # A/Bs in which one side moved almost every benchmark by one factor: the machine, not the code.
    environment = GaugeMetricFamily("roofwatch_device_environment_shifts",
                                    "Confirmation A/Bs measured again because the device moved every benchmark",
                                    labels=["device_class", "hostname", "fingerprint"])
    for device_class, hostname, fingerprint, count in shifts:
        environment.add_metric([device_class, hostname, fingerprint[:12]], count)
    durations = [(finished - started).total_seconds() for started, finished in spans if started and finished]
    return [runs, duration_histogram(durations), reports, webhooks, environment]


def _broker_client(url: str) -> redis.Redis:
    if url.startswith("redis+socket://"):  # kombu's spelling of a unix socket
        url = "unix://" + url.removeprefix("redis+socket://")
    return redis.Redis.from_url(url, socket_connect_timeout=BROKER_TIMEOUT_S, socket_timeout=BROKER_TIMEOUT_S,
                                retry=Retry(NoBackoff(), 0))


def _keys(client: redis.Redis, pattern: str) -> list[str]:
    return [k.decode() if isinstance(k, bytes) else str(k) for k in client.scan_iter(match=pattern, count=1000)]


def read_broker(client: redis.Redis) -> tuple[list[Heartbeat], dict[str, int], int]:
    """Worker heartbeats, messages waiting per queue, and messages delivered but not acknowledged."""
    keys = _keys(client, WORKER_KEY_PREFIX + "*")
    values = client.mget(keys) if keys else []
    workers = [hb for key, raw in zip(keys, values) if (hb := parse_heartbeat(key, raw)) is not None]
    # A queue is a list named after it, plus one list per message priority step.
    names = {CPU_QUEUE, INGEST_QUEUE} | {q for hb in workers for q in hb.queues}
    names |= {key.split(Channel.sep, 1)[0] for key in _keys(client, GPU_QUEUE_PATTERN)}
    queues = sorted(names)
    lists = [(queue, f"{queue}{Channel.sep}{p}" if p else queue) for queue in queues for p in PRIORITY_STEPS]
    pipe = client.pipeline(transaction=False)
    for _, key in lists:
        pipe.llen(key)
    pipe.hlen(Channel.unacked_key)
    *lengths, unacked = pipe.execute(raise_on_error=False)
    depth = dict.fromkeys(queues, 0)
    for (queue, _), length in zip(lists, lengths):
        depth[queue] += length if isinstance(length, int) else 0  # a key of another type is no queue
    if not isinstance(unacked, int):
        raise redis.ResponseError(f"{Channel.unacked_key!r} is not a hash: {unacked}")
    return workers, depth, unacked


def broker_metrics(workers: Sequence[Heartbeat], depth: dict[str, int], unacked: int) -> list[Metric]:
    queue = GaugeMetricFamily("roofwatch_queue_depth", "Messages waiting in each Celery queue", labels=["queue"])
    for name, waiting in sorted(depth.items()):
        queue.add_metric([name], waiting)
    unacked_metric = GaugeMetricFamily("roofwatch_unacked_messages",
                                       "Messages delivered to a worker and not acknowledged yet", value=unacked)
    last_seen = GaugeMetricFamily("roofwatch_worker_last_seen_timestamp_seconds",
                                  "When each live worker last refreshed its heartbeat (unix time)",
                                  labels=["node", "device_class"])
    busy = GaugeMetricFamily("roofwatch_worker_busy", "1 while the worker executes a task",
                             labels=["node", "device_class"])
    per_class: dict[str, int] = {}
    for hb in sorted(workers, key=lambda w: w.node):
        last_seen.add_metric([hb.node, hb.device_class], hb.last_seen)
        busy.add_metric([hb.node, hb.device_class], 1 if hb.busy else 0)
        per_class[hb.device_class] = per_class.get(hb.device_class, 0) + 1
    count = GaugeMetricFamily("roofwatch_workers", "Live workers (heartbeat seen in the last 60 s) per device class",
                              labels=["device_class"])
    for device_class, n in sorted(per_class.items()):
        count.add_metric([device_class], n)
    return [queue, unacked_metric, last_seen, busy, count]


def _up(name: str, what: str, up: bool) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, f"1 when {what} answered this scrape, else 0", value=1 if up else 0)


class RoofwatchCollector:
    """Every value read when Prometheus scrapes; one source failing leaves the others standing."""

    def collect(self) -> Iterator[Metric]:
        try:
            found = database_metrics(get_engine())
        except SQLAlchemyError as exc:
            log.warning("metrics: database unreachable: %s", str(exc).splitlines()[0])
            found = []
        yield _up("roofwatch_database_up", "the database", bool(found))
        yield from found

        url = get_settings().broker_url
        if not url:
            return  # embedded mode: no broker to watch
        broker: list[Metric] = []
        try:
            client = _broker_client(url)
            try:
                broker = broker_metrics(*read_broker(client))
            finally:
                client.close()
        except (redis.RedisError, OSError, ValueError) as exc:
            log.warning("metrics: broker unreachable: %s", exc)
        yield _up("roofwatch_broker_up", "the broker", bool(broker))
        yield from broker


registry = CollectorRegistry(auto_describe=False)
registry.register(RoofwatchCollector())

router = APIRouter(tags=["ops"])


@router.get("/metrics", response_class=PlainTextResponse)
def metrics() -> Response:
    """Prometheus text format. No token: it holds counts, queue and worker names, nothing from a repository."""
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
