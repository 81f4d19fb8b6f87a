"""A run's life as the tasks report it: started, its envelope stored (or the run errored), its
measuring task lost; an A/B's envelope stored; a worker's device registered.

Each step reloads by id and skips what is done already, so a redelivered task message is
harmless; ``roofwatch.service.tasks`` only names the steps for Celery.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.exc import OperationalError
from sqlmodel import Session, select

from roofwatch.common.envelope import DeviceInfo
from roofwatch.common.redaction import redact
from roofwatch.common.vocabulary import GITHUB_TRIGGERS, TERMINAL_STATES, RunState, Trigger
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.models import Commit, Comparison, Repository, Run, utcnow
from roofwatch.service.flows import pull_request as pull_requests
from roofwatch.service.flows import push as pushes
from roofwatch.service.flows.dispatch import RUN_TASK_PREFIX
from roofwatch.service.github import reporting
from roofwatch.service.records.comparisons import ingest_ab as ingest_ab_envelope
from roofwatch.service.records.comparisons import parse_ab_envelope
from roofwatch.service.records.ingest import ingest_envelope, parse_envelope, upsert_device

log = logging.getLogger(__name__)

ERROR_CHARS = 4000  # of a run's error: what the run page and the check show


def started(run_id: int) -> None:
    """A worker took the run: it is running, and GitHub shows so for a push or a pull request."""
    report_ids: list[int] = []
    with session_scope() as session:
        run = session.get(Run, run_id)
        if run is not None and run.state == RunState.QUEUED:
            run.state, run.started_at = RunState.RUNNING, utcnow()
            session.add(run)
            report_ids = _show_running(session, run)
    reporting.send(report_ids)


def _show_running(session: Session, run: Run) -> list[int]:
    if run.trigger not in GITHUB_TRIGGERS:
        return []
    repository = session.get(Repository, run.repository_id)
    commit = session.get(Commit, run.commit_id)
    assert repository is not None and commit is not None
    comparison = session.exec(select(Comparison).where(Comparison.run_id == run.id)).first()
    url = pull_requests.compare_url(comparison.id) if comparison and comparison.id else pushes.run_url(run.id)  # type: ignore[arg-type]
    what = "interleaved A/B against the merge-base" if run.trigger == Trigger.PULL_REQUEST else "suites"
    return reporting.show_phase(session, repository, commit.sha, "running", f"running: {what}", url)


def ingest(envelope: dict[str, Any]) -> int:
    """Store a run's envelope; the run id, for the next step. Results that cannot be stored error the
    run (never left "running" for ever); a database outage is raised, for the task to retry."""
    parsed = parse_envelope(envelope)
    try:
        with session_scope() as session:
            run = ingest_envelope(session, parsed)
            log.info("run %s: ingested (%s)", run.id, run.state)
            return run.id  # type: ignore[return-value]
    except OperationalError:
        raise
    except Exception as exc:
        log.exception("run %s: its results could not be stored", parsed.run_id)
        errored(parsed.run_id, redact(f"the results could not be stored: {type(exc).__name__}: {exc}"))
        return parsed.run_id


def errored(run_id: int, reason: str) -> bool:
    """End a run that is not over yet as errored, with why; whether it was not over yet."""
    with session_scope() as session:
        run = session.get(Run, run_id)
        if run is None or run.state in TERMINAL_STATES:
            return False
        run.state, run.error, run.finished_at = RunState.ERRORED, reason.replace("\x00", "")[:ERROR_CHARS], utcnow()
        session.add(run)
        return True


def measuring_lost(task_id: str, why: object | None) -> None:
    """A measuring task raised or was killed for good (``why``: what Celery kept of it): its run errors.

    A task that returns (even an errored envelope) never gets here; this is for hard time limits
    and exceptions escaping the task.
    """
    if not task_id.startswith(RUN_TASK_PREFIX):
        return
    reason = redact(f"the measuring task was lost: {why!r}") if why is not None else "the measuring task was lost"
    run_id = int(task_id.removeprefix(RUN_TASK_PREFIX))
    if errored(run_id, reason):  # the ingest path logs its own failure, with the traceback
        log.error("run %s: %s", run_id, reason)


def ingest_ab(envelope: dict[str, Any]) -> int:
    """Store an A/B's envelope; the comparison id, for the next step."""
    parsed = parse_ab_envelope(envelope)
    with session_scope() as session:
        comparison = ingest_ab_envelope(session, parsed)
        log.info("comparison %s: %s after %d round(s)", comparison.id, comparison.verdict, comparison.rounds)
        return comparison.id  # type: ignore[return-value]


def register_device(device: dict[str, Any]) -> int:
    """A worker announces its device on start, so the row exists before its first run.

    Measured peaks in the message (from ``roofwatch calibrate`` or a worker's calibration on
    start) are stored on the row; a message without them keeps what the row has.
    """
    info = DeviceInfo.model_validate(device)
    with session_scope() as session:
        row = upsert_device(session, info)
        peaks = "measured peaks stored" if info.peak_bandwidth and info.peak_flops else "no peaks in the message"
        log.info("device %s (%s) registered from %s; %s", row.id, info.device_class, info.hostname, peaks)
        return row.id  # type: ignore[return-value]
