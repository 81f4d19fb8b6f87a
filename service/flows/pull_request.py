"""The pull-request flow: A/B of the head against its merge-base, then one verdict on GitHub.

``start`` fetches the repository, finds the merge-base of the head with the target branch,
creates the ``Run`` (trigger ``pull_request``) and the ``Comparison`` that decides it, shows
"queued" on the head and sends the interleaved A/B to the device's queue. ``finish`` runs
after the comparison is ingested: it closes the run and publishes the verdict and the comment.
A newer head of the same pull request supersedes older ones; closing the pull request cancels.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlmodel import Session, col, select

from roofwatch.common.device import probe
from roofwatch.common.task_names import TaskName
from roofwatch.common.vocabulary import ACTIVE_STATES, RunState, Trigger
from roofwatch.git import checkout
from roofwatch.service.core.comparison_details import add_details, details_of
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.errors import CheckoutError, PullRequestError
from roofwatch.service.core.keys import comparison_key, next_attempt, pull_request_run_key, pull_request_run_key_prefix
from roofwatch.service.core.links import compare_url, dashboard_url, run_url
from roofwatch.service.core.models import Commit, Comparison, Repository, Run, utcnow
from roofwatch.service.flows import ab, dispatch
from roofwatch.service.github import reporting
from roofwatch.service.github.comment import ReportContext, render_comment, summarize
from roofwatch.service.records.comparisons import comparison_report
from roofwatch.service.records.runs import upsert_commit

log = logging.getLogger(__name__)

# A comparison that ended gives the run it decides its own state; one that did not (a state no worker should
# leave it in when it asks for the verdict) leaves the run errored, never passing.
ENDED_COMPARISON_STATES = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.ERRORED})


@dataclass(frozen=True)
class PullRequestHead:
    repository_id: int
    number: int
    head_sha: str
    base_ref: str
    base_sha: str
    title: str = ""


def device_class() -> str:
    """Where webhook-triggered work runs: the configured class, or this machine's device."""
    return get_settings().pr_device_class or probe().device_class




def start(head: PullRequestHead) -> int | None:
    """Create and submit the A/B for this head; the run id, or None when one is already under way."""
    settings = get_settings()
    with session_scope() as session:
        repository = session.get(Repository, head.repository_id)
        assert repository is not None
    try:
        mirror = checkout.ensure_mirror(settings.mirrors_dir, repository.clone_url)
        if not checkout.has_commit(mirror, head.head_sha):
            raise PullRequestError(f"head commit {head.head_sha[:12]} is not in {repository.full_name}")
        merge_base = checkout.merge_base(mirror, head.base_sha, head.head_sha)
        infos = [checkout.commit_info(mirror, sha) for sha in (merge_base, head.head_sha)]
    except (CheckoutError, PullRequestError) as exc:
        _could_not_measure(repository.id, head, str(exc))  # type: ignore[arg-type]
        raise PullRequestError(str(exc)) from exc

    device = device_class()
    with session_scope() as session:
        repository = session.get(Repository, head.repository_id)
        assert repository is not None
        base, head_commit = (upsert_commit(session, repository, info) for info in infos)
        report_ids = _supersede(session, repository, head)
        if _active_run(session, repository, head) is not None:
            log.info("%s#%s: %s already queued or running", repository.full_name, head.number, head.head_sha[:12])
            reporting.send(report_ids)
            return None
        attempt = next_attempt(session, Run, pull_request_run_key_prefix(
            repository.full_name, head.number, head.head_sha))
        run = Run(repository_id=repository.id, commit_id=head_commit.id, trigger=Trigger.PULL_REQUEST,  # type: ignore[arg-type]
                  pr_number=head.number, base_sha=merge_base,
                  idempotency_key=pull_request_run_key(repository.full_name, head.number, head.head_sha, attempt))
        session.add(run)
        session.flush()
        key = comparison_key(repository, merge_base, head.head_sha, device, f"pull_request#{head.number}", attempt)
        comparison, job = ab.prepare(session, repository, base, head_commit, key, purpose="pull_request",
                                     run_id=run.id, details={"pull_request": {
                                         "number": head.number, "base_ref": head.base_ref, "title": head.title}})
        add_details(comparison, task_id=dispatch.task_id_for_comparison(comparison.id))  # type: ignore[arg-type]
        session.add(comparison)
        report_ids += reporting.show_phase(
            session, repository, head.head_sha, "queued",
            f"queued: A/B against merge-base {merge_base[:7]} with {head.base_ref} on {device}",
            compare_url(comparison.id))  # type: ignore[arg-type]
        run_id = run.id
    reporting.send(report_ids)
    log.info("%s#%s: run %s compares %s with merge-base %s on %s", repository.full_name, head.number, run_id,
             head.head_sha[:12], merge_base[:12], device)
    ab.start(job, device, then=TaskName.FINISH_PULL_REQUEST)
    return run_id


def finish(comparison_id: int) -> None:
    """Close the run a comparison decides and publish its verdict and the PR comment."""
    with session_scope() as session:
        comparison = session.get(Comparison, comparison_id)
        if comparison is None or comparison.run_id is None:
            return
        run = session.get(Run, comparison.run_id)
        repository = session.get(Repository, comparison.repository_id)
        assert run is not None and repository is not None
        if run.state == RunState.CANCELLED:
            log.info("run %s was cancelled; its verdict is not posted", run.id)
            return
        run.state = RunState(comparison.state) if comparison.state in ENDED_COMPARISON_STATES else RunState.ERRORED
        run.error, run.device_id = comparison.error, comparison.device_id
        run.suites_source = details_of(comparison).get("suites_source", "")
        run.started_at = run.started_at or comparison.created_at
        run.finished_at = utcnow()
        session.add(run)
        head = session.get(Commit, run.commit_id)
        assert head is not None
        report = comparison_report(session, comparison_id)
        summary = summarize(report)
        pr = details_of(comparison).get("pull_request", {})
        context = ReportContext(repository=repository.full_name, pr_number=run.pr_number or 0,
                                base_ref=pr.get("base_ref", repository.default_branch),
                                dashboard_url=compare_url(comparison_id))
        body = render_comment(report, context)
        report_ids = reporting.show_summary(session, repository, head.sha, summary, context.dashboard_url, body)
        report_ids += reporting.show_comment(session, repository, context.pr_number, body)
    reporting.send(report_ids)


def latest_comparison(session: Session, repository_id: int, number: int, head_sha: str) -> Comparison | None:
    """The newest finished comparison of pull request ``number`` at ``head_sha``."""
    return session.exec(
        select(Comparison).join(Run, col(Comparison.run_id) == Run.id).join(Commit, col(Run.commit_id) == Commit.id)
        .where(Run.repository_id == repository_id, Run.pr_number == number, Run.trigger == Trigger.PULL_REQUEST,
               Commit.sha == head_sha, col(Comparison.finished_at).is_not(None))
        .order_by(col(Comparison.id).desc())).first()


def cancel(repository_id: int, number: int, reason: str) -> list[int]:
    """Cancel every queued or running run of a pull request; the cancelled run ids."""
    with session_scope() as session:
        repository = session.get(Repository, repository_id)
        assert repository is not None
        runs = session.exec(select(Run).where(Run.repository_id == repository_id, Run.pr_number == number,
                                              Run.trigger == Trigger.PULL_REQUEST, col(Run.state).in_(ACTIVE_STATES))).all()
        report_ids = [rid for run in runs for rid in _cancel_run(session, repository, run, reason)]
        cancelled = [run.id for run in runs]
    reporting.send(report_ids)
    return [r for r in cancelled if r is not None]


def _supersede(session: Session, repository: Repository, head: PullRequestHead) -> list[int]:
    older = session.exec(select(Run, Commit).where(
        Run.repository_id == repository.id, Run.pr_number == head.number, Run.trigger == Trigger.PULL_REQUEST,
        col(Run.state).in_(ACTIVE_STATES), Run.commit_id == Commit.id, Commit.sha != head.head_sha)).all()
    return [rid for run, _ in older
            for rid in _cancel_run(session, repository, run, f"superseded by {head.head_sha[:7]}")]


def _active_run(session: Session, repository: Repository, head: PullRequestHead) -> Run | None:
    return session.exec(select(Run).where(
        Run.repository_id == repository.id, Run.pr_number == head.number, Run.trigger == Trigger.PULL_REQUEST,
        col(Run.state).in_(ACTIVE_STATES), Run.commit_id == Commit.id, Commit.sha == head.head_sha)).first()


def _cancel_run(session: Session, repository: Repository, run: Run, reason: str) -> list[int]:
    run.state, run.error, run.finished_at = RunState.CANCELLED, reason, utcnow()
    session.add(run)
    for comparison in session.exec(select(Comparison).where(Comparison.run_id == run.id)).all():
        if comparison.finished_at is None:
            comparison.state, comparison.error = RunState.CANCELLED, reason
            session.add(comparison)
            if not get_settings().embedded:
                # Queued: never starts. Running: the worker stops it; its envelope is then ignored.
                dispatch.revoke(dispatch.task_id_for_comparison(comparison.id))  # type: ignore[arg-type]
    commit = session.get(Commit, run.commit_id)
    assert commit is not None
    return reporting.show_phase(session, repository, commit.sha, "cancelled", f"cancelled: {reason}",
                                run_url(run.id))  # type: ignore[arg-type]


def _could_not_measure(repository_id: int, head: PullRequestHead, reason: str) -> None:
    from roofwatch.service.github.comment import Summary

    with session_scope() as session:
        repository = session.get(Repository, repository_id)
        assert repository is not None
        ids = reporting.show_summary(session, repository, head.head_sha,
                                     Summary("failure", f"could not measure: {reason}"),
                                     dashboard_url())
    reporting.send(ids)
