"""The GPU-side task: measure one commit and hand the envelope on. No DB, no GitHub."""

from __future__ import annotations

import logging
from typing import Any

from workers.celery_app import app
from workers.runner import Job, local_progress, run_job

log = logging.getLogger(__name__)


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
