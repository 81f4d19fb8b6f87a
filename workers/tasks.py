"""The GPU-side tasks: measure one commit (or an A/B pair) and hand the envelope on.

No DB, no GitHub: what a worker learns travels as an envelope to the ``ingest`` queue.
A task that was redelivered too often (its run kills the worker) or ran out of time still
returns an envelope, an errored one, so the run is recorded instead of waiting forever.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from roofwatch.common import redelivery
from roofwatch.common.celery_app import TaskName, app, send
from roofwatch.common.device import probe
from roofwatch.common.envelope import ABEnvelope, Envelope
from roofwatch.common.jobs import ABJob, Job
from roofwatch.common.settings import get_worker_settings
from roofwatch.workers.ab import RoundStatus, run_ab
from roofwatch.workers.activity import Activity, announce
from roofwatch.workers.runner import run_job

log = logging.getLogger(__name__)

# Set by an in-process caller (the CLI in embedded mode) to follow the rounds of a comparison.


@app.task(name=str(TaskName.RUN_COMMIT), bind=True, acks_late=True,
          soft_time_limit=4 * 3600, time_limit=4 * 3600 + 300)
def run_commit(self: Any, job: dict[str, Any]) -> dict[str, Any]:
    """Measure ``job`` (a ``Job`` as a dict) and return the envelope as JSON-ready data."""
    spec = Job(**_local(self, job))
    started = datetime.now(UTC)

    def errored(reason: str) -> dict[str, Any]:
        log.error("run %s: %s", spec.run_id, reason)
        return Envelope(run_id=spec.run_id, idempotency_key=spec.idempotency_key, repository=spec.repository,
                        sha=spec.sha, status="errored", reason=reason, device=probe(), started_at=started,
                        finished_at=datetime.now(UTC)).model_dump(mode="json")

    too_many = _too_many_attempts(self)
    if too_many:
        return errored(too_many)
    log.info("run %s: measuring %s@%s", spec.run_id, spec.repository, spec.sha[:12])
    send(TaskName.RUN_STARTED, spec.run_id)
    try:
        envelope = run_job(spec, progress=_progress_reporter(self, spec))
    except SoftTimeLimitExceeded:
        return errored(f"the run exceeded its time limit ({self.soft_time_limit:.0f} s) and was stopped")
    except Exception as exc:  # noqa: BLE001 - a run that cannot finish is recorded as errored, never left running
        log.exception("run %s: failed inside roofwatch", spec.run_id)
        return errored(f"roofwatch could not finish this run: {type(exc).__name__}: {exc}"[:2000])
    log.info("run %s: %s", spec.run_id, envelope.status)
    return envelope.model_dump(mode="json")


def _local(task: Any, job: dict[str, Any]) -> dict[str, Any]:
    """The job with this host's data directory: mirrors and worktrees are per host, not the submitter's."""
    if task.request.is_eager:
        return job
    return job | {"data_dir": str(get_worker_settings().data_dir)}


def _too_many_attempts(task: Any) -> str | None:
    """Why this delivery must not run again, or None. Counted in the broker's Redis."""
    if task.request.is_eager:
        return None
    attempt = redelivery.count_attempt(redelivery.client_for(get_worker_settings().broker_url), task.request.id)
    if attempt > redelivery.MAX_ATTEMPTS:
        return (f"not run again: the worker was lost {attempt - 1} times while running it "
                f"(a crash, an out-of-memory kill or a host failure); rejected after {redelivery.MAX_ATTEMPTS} attempts")
    if attempt > 1:
        log.warning("task %s: attempt %d of %d (redelivered after its worker was lost)",
                    task.request.id, attempt, redelivery.MAX_ATTEMPTS)
    return None


def _progress_reporter(task: Any, spec: Job):  # type: ignore[no-untyped-def]
    """Suite-level progress: to a local listener when eager, to the result backend otherwise."""

    def report(suite: str, event: str) -> None:
        announce(Activity("run", spec.run_id, (spec.sha,), suite, event))
        if not task.request.is_eager:
            task.update_state(state="PROGRESS", meta={"suite": suite, "event": event})

    return report


class _RoundReporter:
    """Suite-level progress to a local listener, and after each round what is still open and the time
    left: to the listener, and to the service (which shows it on the API, the check and the compare page)."""

    def __init__(self, spec: ABJob) -> None:
        self.spec = spec
        self.open: int | None = None  # round one measures everything
        self.eta_s: float | None = None

    def suite(self, index: int, side: str, suite: str, event: str) -> None:
        spec = self.spec
        announce(Activity("comparison", spec.comparison_id, (spec.base_sha, spec.head_sha), suite, event,
                          round=index + 1, rounds=spec.max_rounds, side=side, open=self.open, eta_s=self.eta_s))

    def started(self) -> None:
        """Before round one: the comparison is running from now on, not queued (round one is the longest)."""
        self._send(TaskName.COMPARISON_STARTED, self.spec.comparison_id)

    def round(self, status: RoundStatus) -> None:
        self.open, self.eta_s = len(status.open), status.eta_s
        self._send(TaskName.COMPARISON_PROGRESS, self.spec.comparison_id, status.index + 1, list(status.open),
                   status.round_s, status.eta_s)

    def _send(self, name: TaskName, *args: object) -> None:
        try:
            send(name, *args)
        except Exception:  # noqa: BLE001 - progress is a courtesy: a broker hiccup must not cost the measurement
            log.warning("comparison %s: %s was not sent", self.spec.comparison_id, name, exc_info=True)


@app.task(name=str(TaskName.RUN_AB), bind=True, acks_late=True,
          soft_time_limit=8 * 3600, time_limit=8 * 3600 + 300)
def run_ab_task(self: Any, job: dict[str, Any]) -> dict[str, Any]:
    """Interleave ``job`` (an ``ABJob`` as a dict) and return the A/B envelope as JSON-ready data."""
    spec = ABJob(**_local(self, job))
    started = datetime.now(UTC)

    def errored(reason: str) -> dict[str, Any]:
        log.error("comparison %s: %s", spec.comparison_id, reason)
        return ABEnvelope(comparison_id=spec.comparison_id, idempotency_key=spec.idempotency_key,
                          repository=spec.repository, base_sha=spec.base_sha, head_sha=spec.head_sha,
                          status="errored", reason=reason, device=probe(), started_at=started,
                          finished_at=datetime.now(UTC)).model_dump(mode="json")

    too_many = _too_many_attempts(self)
    if too_many:
        return errored(too_many)
    log.info("comparison %s: %s %s..%s", spec.comparison_id, spec.repository, spec.base_sha[:12], spec.head_sha[:12])
    if spec.run_id is not None:
        send(TaskName.RUN_STARTED, spec.run_id)
    try:
        reporter = _RoundReporter(spec)
        reporter.started()
        envelope = run_ab(spec, progress=reporter.suite, on_round=reporter.round)
    except SoftTimeLimitExceeded:
        return errored(f"the comparison exceeded its time limit ({self.soft_time_limit:.0f} s) and was stopped")
    log.info("comparison %s: %s after %d round(s)", spec.comparison_id, envelope.status,
             len({r.index for r in envelope.rounds}))
    return envelope.model_dump(mode="json")
