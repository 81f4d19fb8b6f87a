"""The Celery app shared by GPU workers and the service's CPU tasks: both sides send and serve through it.

With ``ROOFWATCH_BROKER_URL`` unset (embedded mode) tasks execute eagerly in the calling
process through exactly the code path a distributed worker runs.

Queues: ``gpu.<device-class>`` (one task at a time per GPU), ``ingest`` (envelopes into the
database) and ``cpu`` (analysis and reports).
"""

from __future__ import annotations

from celery import Celery, Signature, chain
from celery.result import AsyncResult
from celery.schedules import crontab

from roofwatch.common.settings import get_worker_settings
from roofwatch.common.task_names import TaskName

# Longer than the longest task may run (the A/B task's hard limit is 8 h 5 min), so kombu's own
# redelivery never hands a live run to a second worker; the heartbeat and in-flight records of
# ``roofwatch.common.redelivery`` make recovery fast.
VISIBILITY_TIMEOUT_S = 9 * 3600

INGEST_QUEUE = "ingest"
CPU_QUEUE = "cpu"


# The queue of every task that is not measured on a GPU (those go to the GPU's own queue).
QUEUE_OF = {
    TaskName.RUN_STARTED: INGEST_QUEUE, TaskName.INGEST: INGEST_QUEUE, TaskName.INGEST_AB: INGEST_QUEUE,
    TaskName.COMPARISON_STARTED: INGEST_QUEUE, TaskName.COMPARISON_PROGRESS: INGEST_QUEUE,
    TaskName.REGISTER_DEVICE: INGEST_QUEUE, TaskName.MEASURING_LOST: INGEST_QUEUE,
    TaskName.ANALYZE: CPU_QUEUE, TaskName.CONFIRM_CHANGES: CPU_QUEUE, TaskName.FINISH_PULL_REQUEST: CPU_QUEUE,
    TaskName.REPORT_RUN: CPU_QUEUE, TaskName.HANDLE_GITHUB_EVENT: CPU_QUEUE, TaskName.DELIVER_REPORT: CPU_QUEUE,
    TaskName.DELIVER_REPORTS: CPU_QUEUE, TaskName.RECOVER_LOST_WORK: CPU_QUEUE, TaskName.NIGHTLY_RUNS: CPU_QUEUE,
}
# The modules that register tasks, by the side that runs them. A process loads only its own side's:
# a worker that serves nothing but gpu.* queues runs a stranger's code next to the GPU, and has no
# business importing the service (its database, its GitHub client) to do it.
WORKER_TASKS = "roofwatch.workers.tasks"
SERVICE_TASKS = "roofwatch.service.tasks"


def task_modules(queues: list[str]) -> list[str]:
    """What a worker serving ``queues`` registers: the GPU task always, the service's only off gpu.* queues."""
    return [WORKER_TASKS] + ([SERVICE_TASKS] if any(not q.startswith("gpu.") for q in queues) else [])


def make_app() -> Celery:
    settings = get_worker_settings()
    # Every side's tasks by default (the API, the CLI, embedded runs, CPU workers); a GPU-only
    # worker narrows this to its own before it starts (workers/worker.py).
    app = Celery("roofwatch", include=[WORKER_TASKS, SERVICE_TASKS])
    app.conf.update(
        broker_url=settings.broker_url or "memory://",
        result_backend=settings.broker_url or "cache+memory://",
        task_always_eager=settings.embedded,
        task_eager_propagates=True,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        # A worker killed mid-run leaves the message unacked, so it is redelivered;
        # idempotency keys make the second delivery finish the same run, not a new one.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=CPU_QUEUE,
        task_routes={str(name): {"queue": queue} for name, queue in QUEUE_OF.items()},
        # Run by `roofwatch beat`: reports GitHub did not accept are retried from the outbox;
        # work held by a worker whose heartbeat stopped is requeued; each default branch gets
        # a full run every night (its head, even when no push came).
        beat_schedule={
            "deliver-github-reports": {"task": str(TaskName.DELIVER_REPORTS), "schedule": 60.0},
            "recover-lost-work": {"task": str(TaskName.RECOVER_LOST_WORK), "schedule": 60.0},
            "nightly-runs": {"task": str(TaskName.NIGHTLY_RUNS),
                             "schedule": crontab(hour=settings.nightly_hour, minute=0)},
        },
        broker_transport_options={"visibility_timeout": VISIBILITY_TIMEOUT_S},
        result_backend_transport_options={"visibility_timeout": VISIBILITY_TIMEOUT_S},
        # The broker going away for a while (a Redis restart) is waited out, not fatal:
        # workers reconnect forever, and publishing retries for about two minutes.
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        task_publish_retry_policy={"max_retries": 24, "interval_start": 0.5, "interval_step": 1.0,
                                   "interval_max": 5.0},
        redis_retry_on_timeout=True,
        redis_socket_keepalive=True,
        result_expires=7 * 24 * 3600,
    )
    return app


app = make_app()


# -- sending: the only place a task leaves for the queue (or, eager, runs) ----------------------------

def signature(name: TaskName, *args: object, immutable: bool = False) -> Signature:
    """The task ``name`` with ``args``, not sent yet (a step of a chain)."""
    if app.conf.task_always_eager:
        # An eager signature runs the registered task object: make sure every module that
        # registers one (the app's ``include``) has been imported in this process.
        app.loader.import_default_modules()
    # A plain str: Celery reads a ``.name`` off anything that has one, and an enum member does.
    return app.signature(str(name), args=args, immutable=immutable)


def send(name: TaskName, *args: object) -> AsyncResult:
    """Queue the task ``name`` (eager: run it now, here)."""
    return signature(name, *args).apply_async()


def send_chain(*steps: Signature) -> AsyncResult:
    """Queue ``steps``, each handed the one before's result (eager: run them all now, here)."""
    return chain(*steps).apply_async()
