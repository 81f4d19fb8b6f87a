"""CPU-side tasks: mark a run started, ingest its envelope, analyse it.

Tasks take ids or plain JSON, reload state, and skip work already done, so a redelivered
message is harmless. Database outages are retried with backoff; bad data is not.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

from celery.result import AsyncResult
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, select

from roofwatch.common.celery_app import TaskName, app
from roofwatch.common.envelope import DeviceInfo
from roofwatch.common.errors import RoofwatchError
from roofwatch.common.redaction import redact
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.models import Commit, Comparison, Repository, Run, WebhookDelivery, utcnow
from roofwatch.service.core.vocabulary import TERMINAL_STATES
from roofwatch.service.flows import github_events as events
from roofwatch.service.flows import main_branch, nightly
from roofwatch.service.flows import pull_request as pull_requests
from roofwatch.service.flows import push as pushes
from roofwatch.service.flows.dispatch import RUN_TASK_PREFIX
from roofwatch.service.github import outbox, reporting
from roofwatch.service.records.comparisons import ingest_ab as ingest_ab_envelope
from roofwatch.service.records.comparisons import parse_ab_envelope
from roofwatch.service.records.ingest import ingest_envelope, parse_envelope, upsert_device
from roofwatch.workers import redelivery

log = logging.getLogger(__name__)

RETRY = dict(autoretry_for=(OperationalError,), retry_backoff=2, retry_backoff_max=60,
             retry_jitter=True, max_retries=12)


@app.task(name=str(TaskName.RUN_STARTED), **RETRY)
def run_started(run_id: int) -> None:
    report_ids: list[int] = []
    with session_scope() as session:
        run = session.get(Run, run_id)
        if run is not None and run.state == "queued":
            run.state, run.started_at = "running", utcnow()
            session.add(run)
            report_ids = _show_running(session, run)
    reporting.send(report_ids)


def _show_running(session: Session, run: Run) -> list[int]:
    if run.trigger not in ("push", "pull_request"):
        return []
    repository = session.get(Repository, run.repository_id)
    commit = session.get(Commit, run.commit_id)
    assert repository is not None and commit is not None
    comparison = session.exec(select(Comparison).where(Comparison.run_id == run.id)).first()
    url = pull_requests.compare_url(comparison.id) if comparison and comparison.id else pushes.run_url(run.id)  # type: ignore[arg-type]
    what = "interleaved A/B against the merge-base" if run.trigger == "pull_request" else "suites"
    return reporting.show_phase(session, repository, commit.sha, "running", f"running: {what}", url)


@app.task(name=str(TaskName.INGEST), **RETRY)
def ingest(envelope: dict[str, Any]) -> int:
    """Store an envelope; returns the run id for the next task in the chain."""
    parsed = parse_envelope(envelope)
    try:
        with session_scope() as session:
            run = ingest_envelope(session, parsed)
            log.info("run %s: ingested (%s)", run.id, run.state)
            return run.id  # type: ignore[return-value]
    except OperationalError:
        raise
    except Exception as exc:
        # Results that cannot be stored must not leave the run "running" for ever.
        log.exception("run %s: its results could not be stored", parsed.run_id)
        _errored(parsed.run_id, redact(f"the results could not be stored: {type(exc).__name__}: {exc}"))
        return parsed.run_id


def _errored(run_id: int, reason: str) -> None:
    with session_scope() as session:
        run = session.get(Run, run_id)
        if run is not None and run.state not in TERMINAL_STATES:
            run.state, run.error, run.finished_at = "errored", reason.replace("\x00", "")[:4000], utcnow()
            session.add(run)


@app.task(name=str(TaskName.ANALYZE), **RETRY)
def analyze(run_id: int) -> dict[str, Any]:
    """Analyse a run, then start what it asks for (confirmations, bisection) once committed."""
    return asdict(main_branch.after_run(run_id))


@app.task(name=str(TaskName.INGEST_AB), **RETRY)
def ingest_ab(envelope: dict[str, Any]) -> int:
    """Store an A/B envelope; returns the comparison id for the next task in the chain."""
    parsed = parse_ab_envelope(envelope)
    with session_scope() as session:
        comparison = ingest_ab_envelope(session, parsed)
        log.info("comparison %s: %s after %d round(s)", comparison.id, comparison.verdict, comparison.rounds)
        return comparison.id  # type: ignore[return-value]


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
    """Act on an accepted webhook delivery; what happened is kept on the delivery's record.

    A failure is recorded too, a bug's included (which then raises on, with its traceback), so
    no delivery stays "accepted" with nothing to show for it. Only a database outage is left
    to the retries.
    """
    try:
        detail = events.handle(event, payload)
    except (pull_requests.PullRequestError, RoofwatchError) as exc:
        log.warning("delivery %s: %s", delivery_id, exc)
        _record_outcome(delivery_id, "failed", str(exc))
        return str(exc)
    except OperationalError:
        raise
    except Exception as exc:
        _record_outcome(delivery_id, "failed", f"roofwatch failed on it ({type(exc).__name__}); "
                                               "the service log has the traceback")
        raise
    _record_outcome(delivery_id, "accepted", detail)
    return detail


def _record_outcome(delivery_id: str, outcome: str, detail: str) -> None:
    with session_scope() as session:
        record = session.exec(select(WebhookDelivery).where(WebhookDelivery.delivery_id == delivery_id)).first()
        if record is None:
            log.warning("delivery %s: no record to keep its outcome (%s: %s)", delivery_id, outcome, detail)
            return
        record.outcome, record.detail = outcome, redact(f"{record.detail} → {detail}")[:4000]
        session.add(record)


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
    """A worker announces its device on start; the device row exists before its first run.

    Measured peaks in the message (from ``roofwatch calibrate`` or a worker's calibration on
    start) are stored on the row; a message without them keeps what the row has.
    """
    info = DeviceInfo.model_validate(device)
    with session_scope() as session:
        row = upsert_device(session, info)
        peaks = "measured peaks stored" if info.peak_bandwidth and info.peak_flops else "no peaks in the message"
        log.info("device %s (%s) registered from %s; %s", row.id, info.device_class, info.hostname, peaks)
        return row.id  # type: ignore[return-value]


@app.task(name=str(TaskName.MEASURING_LOST), **RETRY)
def measuring_lost(task_id: str) -> None:
    """Errback of a measuring task that raised or was killed for good: its run is errored, not left running.

    A task that returns (even an errored envelope) never gets here; this is for hard time
    limits and exceptions escaping the task.
    """
    why = None if app.conf.task_always_eager else AsyncResult(task_id, app=app).result
    reason = redact(f"the measuring task was lost: {why!r}") if why is not None else "the measuring task was lost"
    with session_scope() as session:
        if task_id.startswith(RUN_TASK_PREFIX):
            run = session.get(Run, int(task_id.removeprefix(RUN_TASK_PREFIX)))
            if run is not None and run.state not in TERMINAL_STATES:
                run.state, run.error, run.finished_at = "errored", reason[:4000], utcnow()
                session.add(run)
                log.error("run %s: %s", run.id, reason)


@app.task(name=str(TaskName.RECOVER_LOST_WORK), **RETRY)
def recover_lost_work() -> dict[str, list[str]]:
    """Requeue what workers held whose heartbeat stopped (scheduled every minute)."""
    client = redelivery.client_for(get_settings().broker_url)
    return redelivery.recover_dead_workers(app, client) if client is not None else {}


@app.task(name=str(TaskName.NIGHTLY_RUNS), **RETRY)
def nightly_runs() -> dict[str, int | str]:
    """Start the nightly full run of every default branch (scheduled by `roofwatch beat`)."""
    return nightly.start_all(utcnow().date())
