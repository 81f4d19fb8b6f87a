"""The one seam between the flows and Celery: "measure this", "A/B these", then call back.

Flows never import a task module; they name tasks by their stable names (the names workers and
brokers know them by), and ``roofwatch.service.tasks`` — which imports the flows — implements the
callbacks. Embedded (no broker), the same chains execute eagerly in this process.
"""

from __future__ import annotations

from dataclasses import asdict
from enum import StrEnum

from celery import Signature, chain
from celery.result import AsyncResult

from roofwatch.service.core import task_queue
from roofwatch.workers.ab import ABJob
from roofwatch.workers.celery_app import app
from roofwatch.workers.runner import Job

RUN_TASK_PREFIX = "roofwatch-run-"
COMPARISON_TASK_PREFIX = "roofwatch-comparison-"


class Task(StrEnum):
    """Every task a flow sends, by the name it is registered under."""

    RUN_COMMIT = "roofwatch.run_commit"
    RUN_AB = "roofwatch.run_ab"
    INGEST = "roofwatch.ingest"
    ANALYZE = "roofwatch.analyze"
    INGEST_AB = "roofwatch.ingest_ab"
    CONFIRM_CHANGES = "roofwatch.confirm_changes"
    FINISH_PULL_REQUEST = "roofwatch.finish_pull_request"
    REPORT_RUN = "roofwatch.report_run"
    MEASURING_LOST = "roofwatch.measuring_lost"


def task_id_for_run(run_id: int) -> str:
    """The Celery id of a run's measuring task, known in advance so the run can be cancelled."""
    return f"{RUN_TASK_PREFIX}{run_id}"


def task_id_for_comparison(comparison_id: int) -> str:
    return f"{COMPARISON_TASK_PREFIX}{comparison_id}"


def revoke(task_id: str) -> None:
    """Queued: the task never starts. Running: its worker stops it (its result is then ignored)."""
    app.control.revoke(task_id, terminate=True)


def _signature(task: Task, *args: object, immutable: bool = False) -> Signature:
    return task_queue.signature(str(task), *args, immutable=immutable)


def then_report_run(run_id: int) -> Signature:
    """Show a measured push's outcome on its commit, after its analysis."""
    return _signature(Task.REPORT_RUN, run_id, immutable=True)


def measure(job: Job, queue: str, then: Signature | None = None) -> AsyncResult:
    """Measure one commit, ingest it, analyse it; ``then`` (immutable) runs last.

    Embedded, this returns once everything has run.
    """
    steps = [
        _signature(Task.RUN_COMMIT, asdict(job)).set(queue=queue, task_id=task_id_for_run(job.run_id),
                                                      link_error=_signature(Task.MEASURING_LOST)),
        _signature(Task.INGEST),
        _signature(Task.ANALYZE),
    ]
    if then is not None:
        steps.append(then)
    return chain(*steps).apply_async()


def ab(job: ABJob, queue: str, then: Task | None) -> AsyncResult:
    """Interleave base and head, ingest the rounds, then hand the comparison id to ``then``."""
    steps = [_signature(Task.RUN_AB, asdict(job)).set(queue=queue, task_id=task_id_for_comparison(job.comparison_id)),
             _signature(Task.INGEST_AB)]
    if then is not None:
        steps.append(_signature(then))
    return chain(*steps).apply_async()
