"""The Celery app shared by GPU workers and the service's CPU tasks.

With ``ROOFWATCH_BROKER_URL`` unset (embedded mode) tasks execute eagerly in the calling
process through exactly the code path a distributed worker runs.

Queues: ``gpu.<device-class>`` (one task at a time per GPU), ``ingest`` (envelopes into the
database) and ``cpu`` (analysis and reports).
"""

from __future__ import annotations

from celery import Celery

from service.config import get_settings

INGEST_QUEUE = "ingest"
CPU_QUEUE = "cpu"


def make_app() -> Celery:
    settings = get_settings()
    app = Celery("roofwatch", include=["workers.tasks", "service.tasks"])
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
        task_routes={
            "roofwatch.ingest": {"queue": INGEST_QUEUE},
            "roofwatch.run_started": {"queue": INGEST_QUEUE},
            "roofwatch.analyze": {"queue": CPU_QUEUE},
            "roofwatch.ingest_ab": {"queue": INGEST_QUEUE},
            "roofwatch.confirm_changes": {"queue": CPU_QUEUE},
            "roofwatch.finish_pull_request": {"queue": CPU_QUEUE},
            "roofwatch.report_run": {"queue": CPU_QUEUE},
            "roofwatch.handle_github_event": {"queue": CPU_QUEUE},
            "roofwatch.deliver_report": {"queue": CPU_QUEUE},
            "roofwatch.deliver_reports": {"queue": CPU_QUEUE},
        },
        # Reports GitHub did not accept are retried from the outbox (run by `celery beat`).
        beat_schedule={"deliver-github-reports": {"task": "roofwatch.deliver_reports", "schedule": 60.0}},
        broker_connection_retry_on_startup=True,
        result_expires=7 * 24 * 3600,
    )
    return app


app = make_app()
