"""CPU-side tasks: mark a run started, ingest its envelope, analyse it.

Tasks take ids or plain JSON, reload state, and skip work already done, so a redelivered
message is harmless. Database outages are retried with backoff; bad data is not.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

from sqlalchemy.exc import OperationalError

from service import bisect, confirm
from service.analyze import analyze_run
from service.comparisons import ingest_ab as ingest_ab_envelope
from service.comparisons import parse_ab_envelope
from service.db import session_scope
from service.followups import dispatch
from service.ingest import ingest_envelope, parse_envelope
from service.models import Comparison, Run, utcnow
from workers.celery_app import app

log = logging.getLogger(__name__)

RETRY = dict(autoretry_for=(OperationalError,), retry_backoff=2, retry_backoff_max=60,
             retry_jitter=True, max_retries=12)


@app.task(name="roofwatch.run_started", **RETRY)
def run_started(run_id: int) -> None:
    with session_scope() as session:
        run = session.get(Run, run_id)
        if run is not None and run.state == "queued":
            run.state, run.started_at = "running", utcnow()
            session.add(run)


@app.task(name="roofwatch.ingest", **RETRY)
def ingest(envelope: dict[str, Any]) -> int:
    """Store an envelope; returns the run id for the next task in the chain."""
    parsed = parse_envelope(envelope)
    with session_scope() as session:
        run = ingest_envelope(session, parsed)
        log.info("run %s: ingested (%s)", run.id, run.state)
        return run.id  # type: ignore[return-value]


@app.task(name="roofwatch.analyze", **RETRY)
def analyze(run_id: int) -> dict[str, Any]:
    """Analyse a run, then start what it asks for (confirmations, bisection) once committed."""
    with session_scope() as session:
        summary = analyze_run(session, run_id)
    log.info("run %s: %d change(s), %d fixed, %d follow-up(s)", run_id, len(summary.changes),
             len(summary.fixed), len(summary.followups))
    dispatch(summary.followups)
    result = asdict(summary)
    result["followups"] = [repr(f) for f in summary.followups]
    return result


@app.task(name="roofwatch.ingest_ab", **RETRY)
def ingest_ab(envelope: dict[str, Any]) -> int:
    """Store an A/B envelope; returns the comparison id for the next task in the chain."""
    parsed = parse_ab_envelope(envelope)
    with session_scope() as session:
        comparison = ingest_ab_envelope(session, parsed)
        log.info("comparison %s: %s after %d round(s)", comparison.id, comparison.verdict, comparison.rounds)
        return comparison.id  # type: ignore[return-value]


@app.task(name="roofwatch.confirm_changes", **RETRY)
def confirm_changes(comparison_id: int) -> list[int]:
    """Store what a confirmation A/B confirmed, then continue any bisection it opened."""
    with session_scope() as session:
        created = confirm.apply(session, comparison_id)
        comparison = session.get(Comparison, comparison_id)
        steps = bisect.next_steps(session, comparison.repository_id) if comparison else []
    log.info("comparison %s: %d change(s) confirmed", comparison_id, len(created))
    dispatch(list(steps))
    return created
