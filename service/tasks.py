"""CPU-side tasks: mark a run started, ingest its envelope, analyse it.

Tasks take ids or plain JSON, reload state, and skip work already done, so a redelivered
message is harmless. Database outages are retried with backoff; bad data is not.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

from sqlalchemy.exc import OperationalError

from service.analyze import analyze_run
from service.db import session_scope
from service.ingest import ingest_envelope, parse_envelope
from service.models import Run, utcnow
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
    with session_scope() as session:
        summary = analyze_run(session, run_id)
    log.info("run %s: %d change(s), %d fixed", run_id, len(summary.changes), len(summary.fixed))
    return asdict(summary)
