"""Send a run through measure → ingest → analyse: the job a worker gets, and the chain it starts.

The same chain runs in both modes: eagerly in this process when no broker is set, through
Redis to ``gpu.<device-class>`` and ``ingest``/``cpu`` workers otherwise.
"""

from __future__ import annotations

from celery import Signature
from celery.result import AsyncResult

from roofwatch.common.jobs import Job
from roofwatch.common.vocabulary import Trigger
from roofwatch.service.core.config import Settings
from roofwatch.service.core.models import Commit, Repository, Run
from roofwatch.service.flows import dispatch
from roofwatch.service.records.suite_configs import job_fields


def job_for(run: Run, repository: Repository, commit: Commit, settings: Settings) -> Job:
    """The worker's job for ``run``, with the repository's stored suites (if any) for the worker to weigh."""
    return Job(
        run_id=run.id, idempotency_key=run.idempotency_key,  # type: ignore[arg-type]
        repository=repository.full_name, clone_url=repository.clone_url, sha=commit.sha,
        data_dir=str(settings.data_dir), suite_timeout_s=settings.suite_timeout,
        output_limit=settings.output_limit, suite_network=repository.suite_network,
        # A pull request's head must not fill a cache that the branch's own runs then use.
        shared_setup_cache=run.trigger != Trigger.PULL_REQUEST,
        **job_fields(run, repository),
    )


def submit(job: Job, queue: str, then: Signature | None = None) -> AsyncResult:
    """Send one job through the chain; in embedded mode this returns after it has finished.

    ``then`` (an immutable signature) runs after the analysis, e.g. the GitHub report of a push.
    """
    return dispatch.measure(job, queue, then)
