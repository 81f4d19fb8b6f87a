"""Send a Celery task by its registered name: the service's one way onto the queue.

Nothing in the service imports a task module to send work; a task is named (``TaskName``), and
``roofwatch.service.tasks`` — the one module that implements them — imports the flows, not the
other way round. ``flows/dispatch.py`` composes chains from ``signature``; everything else sends
with ``send``.

Where a task runs without a broker is decided here and nowhere else: eagerly where it is sent,
except those no caller may wait for (``LANE_OF``), which go to their lane of
``core/embedded.py`` — webhook work to the measuring lane, report deliveries to the reporter's.
(Whether a caller then waits for a result, or checks this machine can measure, stays the caller's.)
"""

from __future__ import annotations

from celery.result import AsyncResult

from roofwatch.common import celery_app
from roofwatch.common.task_names import TaskName
from roofwatch.service.core import embedded

# Embedded, these run on a lane instead of in the sender's call; a report is sent once per row
# however often it is asked for before it goes out (keyed by its arguments).
LANE_OF: dict[TaskName, embedded.Lane] = {
    TaskName.HANDLE_GITHUB_EVENT: embedded.MEASURE,
    TaskName.DELIVER_REPORT: embedded.REPORTS,
}
KEYED = {TaskName.DELIVER_REPORT}


signature = celery_app.signature
send_chain = celery_app.send_chain


def send(name: TaskName, *args: object) -> AsyncResult | None:
    """Queue ``name``; embedded, run it here and now, or on its lane when no caller may wait for it (None)."""
    lane = LANE_OF.get(name)
    if celery_app.app.conf.task_always_eager and lane is not None:
        work = signature(name, *args)
        lane.submit(work.apply, key=(name, *args) if name in KEYED else None)
        return None
    return celery_app.send(name, *args)
