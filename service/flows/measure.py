"""Create runs and send them through run_commit → ingest → analyze.

The same Celery chain runs in both modes: eagerly in this process when no broker is set,
through Redis to ``gpu.<device-class>`` and ``ingest``/``cpu`` workers otherwise.
"""

from __future__ import annotations

from dataclasses import asdict

from celery import Signature, chain
from celery.result import AsyncResult
from sqlmodel import Session, col, select

from service.core.config import Settings
from service.core.models import Commit, Device, Repository, Run
from workers.checkout import CommitInfo
from workers.runner import Job
from workers.tasks import run_commit


def upsert_commit(session: Session, repository: Repository, info: CommitInfo) -> Commit:
    commit = session.exec(select(Commit).where(
        Commit.repository_id == repository.id, Commit.sha == info.sha)).first()
    if commit is None:
        commit = Commit(repository_id=repository.id, sha=info.sha, parents=info.parents,  # type: ignore[arg-type]
                        author=info.author, message=info.message, committed_at=info.committed_at)
        session.add(commit)
        session.flush()
    return commit


def measured_on(session: Session, commit: Commit, device_fingerprint: str) -> Run | None:
    """A finished run of ``commit`` on the device with this fingerprint, if any."""
    return session.exec(
        select(Run).join(Device, col(Run.device_id) == col(Device.id))
        .where(Run.commit_id == commit.id, Device.fingerprint == device_fingerprint,
               col(Run.state).in_(("succeeded", "failed", "skipped")))
    ).first()


def create_run(session: Session, repository: Repository, commit: Commit, key: str,
               trigger: str = "manual") -> Run:
    """The run for ``key``, created queued unless it already exists (idempotent)."""
    run = session.exec(select(Run).where(Run.idempotency_key == key)).first()
    if run is None:
        run = Run(repository_id=repository.id, commit_id=commit.id, trigger=trigger,  # type: ignore[arg-type]
                  idempotency_key=key)
        session.add(run)
        session.flush()
    return run


def job_for(run: Run, repository: Repository, commit: Commit, settings: Settings) -> Job:
    return Job(
        run_id=run.id, idempotency_key=run.idempotency_key,  # type: ignore[arg-type]
        repository=repository.full_name, clone_url=repository.clone_url, sha=commit.sha,
        data_dir=str(settings.data_dir), suite_timeout_s=settings.suite_timeout,
        output_limit=settings.output_limit,
    )


def submit(job: Job, queue: str, then: Signature | None = None) -> AsyncResult:
    """Send one job through the chain; in embedded mode this returns after it has finished.

    ``then`` (an immutable signature) runs after the analysis, e.g. the GitHub report of a push.
    """
    from service.tasks import analyze, ingest, measuring_lost  # the tasks dispatch follow-ups through this module

    measure = run_commit.s(asdict(job)).set(queue=queue, task_id=task_id_for_run(job.run_id),
                                            link_error=measuring_lost.s())
    steps = [measure, ingest.s(), analyze.s()]
    if then is not None:
        steps.append(then)
    return chain(*steps).apply_async()


RUN_TASK_PREFIX = "roofwatch-run-"


def task_id_for_run(run_id: int) -> str:
    """The Celery id of a run's measuring task, known in advance so the run can be cancelled."""
    return f"{RUN_TASK_PREFIX}{run_id}"
