"""Every Celery task's name: what both sides send and register, spelled once.

A module of its own, below the Celery app, so that what only needs a name (logging, the service's
flows) does not build the app to get it. Handed to Celery as ``str(name)``: Celery takes anything
with a ``.name`` attribute for a task object, and an enum member has one.
"""

from __future__ import annotations

import re
from enum import StrEnum


class TaskName(StrEnum):
    """Every task, by the stable name workers and brokers know it by: the one place a name is spelled."""

    RUN_COMMIT = "roofwatch.run_commit"  # gpu.<device class>: measure one commit (workers/tasks.py)
    RUN_AB = "roofwatch.run_ab"  # gpu.<device class>: interleaved rounds of two commits
    RUN_STARTED = "roofwatch.run_started"
    COMPARISON_STARTED = "roofwatch.comparison_started"  # an A/B's first round begins: it is running
    COMPARISON_PROGRESS = "roofwatch.comparison_progress"  # after each A/B round: what is open, time left
    INGEST = "roofwatch.ingest"
    ANALYZE = "roofwatch.analyze"
    INGEST_AB = "roofwatch.ingest_ab"
    CONFIRM_CHANGES = "roofwatch.confirm_changes"
    FINISH_PULL_REQUEST = "roofwatch.finish_pull_request"
    REPORT_RUN = "roofwatch.report_run"
    HANDLE_GITHUB_EVENT = "roofwatch.handle_github_event"
    DELIVER_REPORT = "roofwatch.deliver_report"
    DELIVER_REPORTS = "roofwatch.deliver_reports"
    REGISTER_DEVICE = "roofwatch.register_device"
    MEASURING_LOST = "roofwatch.measuring_lost"
    RECOVER_LOST_WORK = "roofwatch.recover_lost_work"
    NIGHTLY_RUNS = "roofwatch.nightly_runs"


# -- queues: a measuring task goes to its device class's own queue --------------------------------

def is_cpu(device_class: str) -> bool:
    """True for the CPU fallback device (``probe`` names it ``CPU <model>``)."""
    return device_class.startswith("CPU ")


def queue_name(device_class: str) -> str:
    """Celery queue for a device class: ``NVIDIA H200`` → ``gpu.nvidia-h200``."""
    slug = re.sub(r"[^a-z0-9]+", "-", device_class.lower()).strip("-")
    return f"gpu.{slug}"
