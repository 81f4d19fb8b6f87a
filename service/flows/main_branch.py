"""Work that analysing a run asks for: confirm a candidate by A/B, or bisect a range.

Analysis is pure bookkeeping; measuring happens on a worker. ``dispatch`` turns each
follow-up into its database row (a ``Run`` with trigger ``bisect`` or a ``Comparison`` with
purpose ``confirm``, both keyed so a repeat is a no-op) and sends it through the same
Celery chains as any other work: inline when embedded, to the device's queue otherwise.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass

from celery import chain
from sqlmodel import Session, select

from service.core.config import get_settings
from service.core.db import session_scope
from service.core.models import Commit, Comparison, Device, Repository, Run
from service.flows.measure import create_run, job_for, upsert_commit
from service.records.comparisons import ab_job_for, comparison_key, create_comparison
from workers import checkout
from workers.device import queue_name
from workers.errors import RoofwatchError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Confirm:
    """A/B the two commits either side of a candidate change on the candidate's device."""

    repository_id: int
    device_id: int
    good_sha: str
    bad_sha: str


@dataclass(frozen=True)
class Bisect:
    """Measure one commit inside a range whose first bad commit is not known yet."""

    repository_id: int
    device_id: int
    sha: str
    attempt: int = 0  # a commit whose first run left the verdict unclear is measured again


FollowUp = Confirm | Bisect


def confirmation_for(session: Session, repository: Repository, device: Device, good: str,
                     bad: str) -> Comparison | None:
    key = comparison_key(repository, good, bad, device.fingerprint, "confirm")
    return session.exec(select(Comparison).where(Comparison.idempotency_key == key)).first()


def bisect_key_prefix(repository: Repository, sha: str, device: Device) -> str:
    """What every bisect run of ``sha`` on ``device`` is keyed with, before its attempt number."""
    return f"{repository.full_name}@{sha}:{device.fingerprint}:bisect:"


def bisect_key(repository: Repository, sha: str, device: Device, attempt: int = 0) -> str:
    return f"{bisect_key_prefix(repository, sha, device)}{attempt}"


def dispatch(followups: list[FollowUp]) -> None:
    """Create and submit each follow-up once; failures are logged and never break the caller."""
    for followup in dict.fromkeys(followups):
        try:
            if isinstance(followup, Confirm):
                _confirm(followup)
            else:
                _bisect(followup)
        except RoofwatchError as exc:
            log.warning("follow-up %s not started: %s", followup, exc)


def _confirm(followup: Confirm) -> None:
    from service.tasks import confirm_changes, ingest_ab
    from workers.tasks import run_ab_task

    settings = get_settings()
    with session_scope() as session:
        repository = session.get(Repository, followup.repository_id)
        device = session.get(Device, followup.device_id)
        assert repository is not None and device is not None
        if confirmation_for(session, repository, device, followup.good_sha, followup.bad_sha):
            return
        good = _commit(session, repository, followup.good_sha)
        bad = _commit(session, repository, followup.bad_sha)
        key = comparison_key(repository, good.sha, bad.sha, device.fingerprint, "confirm")
        comparison = create_comparison(session, repository, good, bad, key, purpose="confirm")
        job = ab_job_for(comparison, repository, good, bad, str(settings.data_dir), settings.suite_timeout,
                         settings.output_limit, settings.ab_max_rounds, settings.ab_min_rounds)
        queue = queue_name(device.device_class)
    log.info("confirming %s..%s on %s by A/B (comparison %s)", good.sha[:12], bad.sha[:12], queue, job.comparison_id)
    chain(run_ab_task.s(asdict(job)).set(queue=queue), ingest_ab.s(), confirm_changes.s()).apply_async()


def _bisect(followup: Bisect) -> None:
    from service.flows.measure import submit

    settings = get_settings()
    with session_scope() as session:
        repository = session.get(Repository, followup.repository_id)
        device = session.get(Device, followup.device_id)
        assert repository is not None and device is not None
        key = bisect_key(repository, followup.sha, device, followup.attempt)
        if session.exec(select(Run).where(Run.idempotency_key == key)).first():
            return
        commit = _commit(session, repository, followup.sha)
        run = create_run(session, repository, commit, key, trigger="bisect")
        job = job_for(run, repository, commit, settings)
        queue = queue_name(device.device_class)
    log.info("bisecting: measuring %s on %s (run %s)", followup.sha[:12], queue, job.run_id)
    submit(job, queue)


def _commit(session: Session, repository: Repository, sha: str) -> Commit:
    found = session.exec(select(Commit).where(Commit.repository_id == repository.id, Commit.sha == sha)).first()
    if found is not None:
        return found
    mirror = checkout.ensure_mirror(get_settings().mirrors_dir, repository.clone_url)
    return upsert_commit(session, repository, checkout.commit_info(mirror, sha))


def commits_between(repository: Repository, good: str, bad: str) -> list[str]:
    """First-parent SHAs after ``good`` up to and including ``bad``, oldest first."""
    mirror = checkout.ensure_mirror(get_settings().mirrors_dir, repository.clone_url)
    return checkout.rev_range(mirror, f"{good}..{bad}")
