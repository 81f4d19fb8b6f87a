"""Celery adapters: each task names one flow step, by its stable name, and passes ids or plain JSON.

Every step reloads its state and skips work already done, so a redelivered message is harmless;
database outages are retried with backoff (``RETRY``), bad data is not. What a step does is in
the flow it calls.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

from celery.result import AsyncResult
from sqlalchemy.exc import OperationalError

from roofwatch.common import redelivery
from roofwatch.common.celery_app import TaskName, app
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.models import utcnow
from roofwatch.service.flows import comparison_progress as comparison_progress_flow
from roofwatch.service.flows import github_events, main_branch, nightly, run_lifecycle
from roofwatch.service.flows import pull_request as pull_requests
from roofwatch.service.flows import push as pushes
from roofwatch.service.github import outbox, payloads

log = logging.getLogger(__name__)

RETRY = dict(autoretry_for=(OperationalError,), retry_backoff=2, retry_backoff_max=60,
             retry_jitter=True, max_retries=12)


@app.task(name=str(TaskName.RUN_STARTED), **RETRY)
def run_started(run_id: int) -> None:
    run_lifecycle.started(run_id)


@app.task(name=str(TaskName.COMPARISON_STARTED), **RETRY)
def comparison_started(comparison_id: int) -> None:
    comparison_progress_flow.started(comparison_id)


@app.task(name=str(TaskName.COMPARISON_PROGRESS), **RETRY)
def comparison_progress(comparison_id: int, rounds_done: int, open_keys: list[str], round_s: float,
                        eta_s: float) -> None:
    comparison_progress_flow.record(comparison_id, rounds_done, open_keys, round_s, eta_s)


@app.task(name=str(TaskName.INGEST), **RETRY)
def ingest(envelope: dict[str, Any]) -> int:
    """Store an envelope; returns the run id for the next task in the chain."""
    return run_lifecycle.ingest(envelope)


@app.task(name=str(TaskName.ANALYZE), **RETRY)
def analyze(run_id: int) -> dict[str, Any]:
    """Analyse a run, then start what it asks for (confirmations, bisection) once committed."""
    return asdict(main_branch.after_run(run_id))


@app.task(name=str(TaskName.INGEST_AB), **RETRY)
def ingest_ab(envelope: dict[str, Any]) -> int:
    """Store an A/B envelope; returns the comparison id for the next task in the chain."""
    return run_lifecycle.ingest_ab(envelope)


@app.task(name=str(TaskName.CONFIRM_CHANGES), **RETRY)
def confirm_changes(comparison_id: int) -> list[int]:
    """Store what a confirmation A/B confirmed, then continue any bisection it opened."""
    return main_branch.after_confirmation(comparison_id)


@app.task(name=str(TaskName.FINISH_PULL_REQUEST), **RETRY)
def finish_pull_request(comparison_id: int) -> int:
    """Close the pull-request run a comparison decides; publish its verdict and comment."""
    pull_requests.finish(comparison_id)
    return comparison_id


@app.task(name=str(TaskName.REPORT_RUN), **RETRY)
def report_run(run_id: int) -> None:
    """Show a measured push's outcome on its commit."""
    pushes.report(run_id)


@app.task(name=str(TaskName.HANDLE_GITHUB_EVENT), **RETRY)
def handle_github_event(event: str, delivery_id: str, payload: dict[str, Any]) -> str:
    """Act on an accepted webhook delivery (the event as the webhook validated it, ``payloads.for_queue``);
    what happened is kept on the delivery's record."""
    return github_events.handle_delivery(delivery_id, payloads.from_queue(event, payload))


@app.task(name=str(TaskName.DELIVER_REPORT), **RETRY)
def deliver_report(report_id: int) -> bool:
    """Post one report to GitHub; on failure it stays in the outbox for ``deliver_reports``."""
    return outbox.deliver(report_id)


@app.task(name=str(TaskName.DELIVER_REPORTS), **RETRY)
def deliver_reports() -> dict[str, int]:
    """Retry every report GitHub has not accepted yet (scheduled every minute)."""
    delivered, pending = outbox.deliver_due()
    if delivered or pending:
        log.info("reports: %d delivered, %d still pending", delivered, pending)
    return {"delivered": delivered, "pending": pending}


@app.task(name=str(TaskName.REGISTER_DEVICE), **RETRY)
def register_device(device: dict[str, Any]) -> int:
    """A worker announces its device on start; the device row exists before its first run."""
    return run_lifecycle.register_device(device)


@app.task(name=str(TaskName.MEASURING_LOST), **RETRY)
def measuring_lost(task_id: str) -> None:
    """Errback of a measuring task that raised or was killed for good: its run is errored, not left running."""
    why = None if app.conf.task_always_eager else AsyncResult(task_id, app=app).result
    run_lifecycle.measuring_lost(task_id, why)


@app.task(name=str(TaskName.RECOVER_LOST_WORK), **RETRY)
def recover_lost_work() -> dict[str, list[str]]:
    """Requeue what workers held whose heartbeat stopped (scheduled every minute)."""
    client = redelivery.client_for(get_settings().broker_url)
    return redelivery.recover_dead_workers(app, client) if client is not None else {}


@app.task(name=str(TaskName.NIGHTLY_RUNS), **RETRY)
def nightly_runs() -> dict[str, int | str]:
    """Start the nightly full run of every default branch (scheduled by `roofwatch beat`)."""
    return nightly.start_all(utcnow().date())
