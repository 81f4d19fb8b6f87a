"""Starting an A/B, one way for every purpose: a pull request's verdict, the confirmation of a
candidate change, ``roofwatch compare``.

``prepare`` makes the comparison's row and the worker's job inside the caller's session (so the
caller can add what its purpose needs: a run, a status, details); ``start`` sends the job once
that session is committed.
"""

from __future__ import annotations

from dataclasses import replace

from celery.result import AsyncResult
from sqlmodel import Session

from roofwatch.common.jobs import ABJob
from roofwatch.common.task_names import TaskName, queue_name
from roofwatch.service.core.comparison_details import add_details
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.models import Commit, Comparison, Repository
from roofwatch.service.core.reports import ComparisonDetails
from roofwatch.service.flows import dispatch
from roofwatch.service.records.comparisons import ab_job_for, create_comparison


def prepare(session: Session, repository: Repository, base: Commit, head: Commit, key: str, *, purpose: str,
            run_id: int | None = None, details: ComparisonDetails | None = None, max_rounds: int | None = None,
            min_rounds: int | None = None, only: tuple[str, ...] = ()) -> tuple[Comparison, ABJob]:
    """The comparison of ``base`` and ``head`` under idempotency ``key``, and the job that measures it.

    Rounds default to the settings' (``ROOFWATCH_AB_MIN_ROUNDS`` … ``ROOFWATCH_AB_MAX_ROUNDS``), which the
    judging side's ``[tool.roofwatch] ab_min_rounds``/``ab_max_rounds`` replace on the worker;
    ``only`` names the benchmarks (``suite::name``) to measure, a confirmation's candidates.
    """
    settings = get_settings()
    comparison = create_comparison(session, repository, base, head, key, purpose=purpose, run_id=run_id)
    if details:
        add_details(comparison, **details)
        session.add(comparison)
    job = ab_job_for(comparison, repository, base, head, str(settings.data_dir), settings.suite_timeout,
                     settings.output_limit, max_rounds or settings.ab_max_rounds, min_rounds or settings.ab_min_rounds,
                     only=only)
    # Rounds someone asked for are run as asked (the worker keeps them over the repository's own
    # ab_min_rounds/ab_max_rounds, and measures up to an asked-for cap): see ABJob.
    job = replace(job, min_rounds_asked=min_rounds is not None, max_rounds_asked=max_rounds is not None)
    add_details(comparison, max_rounds=job.max_rounds)
    session.add(comparison)
    return comparison, job


def start(job: ABJob, device_class: str, then: TaskName | None = None) -> AsyncResult:
    """Send the job to the queue of ``device_class``'s GPUs; ``then`` gets the comparison id once it is stored.

    Embedded, it has run (and ``then`` too) when this returns.
    """
    return dispatch.ab(job, queue_name(device_class), then=then)
