"""The measuring chains: "measure this", "A/B these", then call back — composed here, sent through
``core/task_queue.py`` (the service's one way onto the queue).

Flows never import a task module; they name tasks by their stable names (the names workers and
brokers know them by), and ``roofwatch.service.tasks`` — which imports the flows — implements the
callbacks. Embedded (no broker), the same chains execute eagerly in this process.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from celery import Signature
from celery.result import AsyncResult

from roofwatch.common.celery_app import app
from roofwatch.common.jobs import ABJob, Job
from roofwatch.common.task_names import TaskName
from roofwatch.service.core import task_queue

RUN_TASK_PREFIX = "roofwatch-run-"
COMPARISON_TASK_PREFIX = "roofwatch-comparison-"


def task_id_for_run(run_id: int) -> str:
    """The Celery id of a run's measuring task, known in advance so the run can be cancelled."""
    return f"{RUN_TASK_PREFIX}{run_id}"


def task_id_for_comparison(comparison_id: int) -> str:
    return f"{COMPARISON_TASK_PREFIX}{comparison_id}"


def revoke(task_id: str) -> None:
    """Queued: the task never starts. Running: its worker stops it (its result is then ignored)."""
    app.control.revoke(task_id, terminate=True)


def then_report_run(run_id: int) -> Signature:
    """Show a measured push's outcome on its commit, after its analysis."""
    return task_queue.signature(TaskName.REPORT_RUN, run_id, immutable=True)


def measure(job: Job, queue: str, then: Signature | None = None) -> AsyncResult:
    """Measure one commit, ingest it, analyse it; ``then`` (immutable) runs last.

    Embedded, this returns once everything has run.
    """
    steps = [
        task_queue.signature(TaskName.RUN_COMMIT, asdict(job)).set(queue=queue, task_id=task_id_for_run(job.run_id),
                                                      link_error=task_queue.signature(TaskName.MEASURING_LOST)),
        task_queue.signature(TaskName.INGEST),
        task_queue.signature(TaskName.ANALYZE),
    ]
    if then is not None:
        steps.append(then)
    return task_queue.send_chain(*steps)


def ab(job: ABJob, queue: str, then: TaskName | None) -> AsyncResult:
    """Interleave base and head, ingest the rounds, then hand the comparison id to ``then``."""
    steps = [task_queue.signature(TaskName.RUN_AB, asdict(job)).set(queue=queue, task_id=task_id_for_comparison(job.comparison_id)),
             task_queue.signature(TaskName.INGEST_AB)]
    if then is not None:
        steps.append(task_queue.signature(then))
    return task_queue.send_chain(*steps)


def github_event(event: str, delivery_id: str, payload: dict[str, Any]) -> None:
    """Handle a verified webhook delivery on a ``cpu`` worker."""
    task_queue.send(TaskName.HANDLE_GITHUB_EVENT, event, delivery_id, payload)


def register_device(info: dict[str, Any]) -> AsyncResult:
    """Store a device and its measured peaks (``DeviceInfo`` as JSON); embedded, done on return."""
    result = task_queue.send(TaskName.REGISTER_DEVICE, info)
    assert result is not None  # no lane: registering a device is waited for
    return result
