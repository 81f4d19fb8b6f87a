"""The GPU-side task: measure one commit and hand the envelope on. No DB, no GitHub."""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Any

from workers.ab import ABJob, RoundProgress, run_ab
from workers.celery_app import app
from workers.runner import Job, local_progress, run_job

log = logging.getLogger(__name__)

# Set by an in-process caller (the CLI in embedded mode) to follow the rounds of a comparison.
ab_progress: ContextVar[RoundProgress | None] = ContextVar("ab_progress", default=None)


@app.task(name="roofwatch.run_commit", bind=True, acks_late=True,
          soft_time_limit=4 * 3600, time_limit=4 * 3600 + 300)
def run_commit(self: Any, job: dict[str, Any]) -> dict[str, Any]:
    """Measure ``job`` (a ``Job`` as a dict) and return the envelope as JSON-ready data."""
    spec = Job(**job)
    log.info("run %s: measuring %s@%s", spec.run_id, spec.repository, spec.sha[:12])
    app.signature("roofwatch.run_started", args=(spec.run_id,)).apply_async()
    envelope = run_job(spec, progress=_progress_reporter(self))
    log.info("run %s: %s", spec.run_id, envelope.status)
    return envelope.model_dump(mode="json")


def _progress_reporter(task: Any):  # type: ignore[no-untyped-def]
    """Suite-level progress: to a local listener when eager, to the result backend otherwise."""
    listener = local_progress.get()

    def report(suite: str, event: str) -> None:
        if listener is not None:
            listener(suite, event)
        if not task.request.is_eager:
            task.update_state(state="PROGRESS", meta={"suite": suite, "event": event})

    return report


@app.task(name="roofwatch.run_ab", bind=True, acks_late=True,
          soft_time_limit=8 * 3600, time_limit=8 * 3600 + 300)
def run_ab_task(self: Any, job: dict[str, Any]) -> dict[str, Any]:
    """Interleave ``job`` (an ``ABJob`` as a dict) and return the A/B envelope as JSON-ready data."""
    spec = ABJob(**job)
    log.info("comparison %s: %s %s..%s", spec.comparison_id, spec.repository, spec.base_sha[:12], spec.head_sha[:12])
    if spec.run_id is not None:
        app.signature("roofwatch.run_started", args=(spec.run_id,)).apply_async()
    listener = ab_progress.get()
    envelope = run_ab(spec, progress=listener)
    log.info("comparison %s: %s after %d round(s)", spec.comparison_id, envelope.status,
             len({r.index for r in envelope.rounds}))
    return envelope.model_dump(mode="json")
