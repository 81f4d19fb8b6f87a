"""The main-branch flow, top-down: a run lands → read it into history → narrow → confirm.

    run measured ──▶ detection (candidates, correctness episodes, narrowing by this run)
                       │
                       ├──▶ narrowing.next_steps: measure a midpoint   ──▶ (a run lands again)
                       └──▶ confirmation.pending: A/B the adjacent pair ──▶ after_confirmation

Git is read from the local mirror; the network (``git fetch``) is used before a transaction
opens, never inside one. Measuring is asked for through ``dispatch`` and comes back as tasks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from sqlmodel import Session, select

from roofwatch.common.errors import RoofwatchError, UnknownRevision
from roofwatch.common.task_names import TaskName, queue_name
from roofwatch.common.vocabulary import AnalysisState, Trigger
from roofwatch.git import checkout
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.keys import bisect_key
from roofwatch.service.core.models import Commit, Comparison, Device, Repository, Run
from roofwatch.service.flows import ab, confirmation, narrowing
from roofwatch.service.flows.confirmation import Confirm
from roofwatch.service.flows.detection import AnalysisSummary, analyze_run
from roofwatch.service.flows.measure import job_for, submit
from roofwatch.service.flows.narrowing import Bisect
from roofwatch.service.records.runs import create_run, find_commit, upsert_commit

log = logging.getLogger(__name__)

FollowUp = Confirm | Bisect


def after_run(run_id: int) -> AnalysisSummary:
    """Analyse a finished run, then start what it asks for (midpoints to measure, A/Bs).

    The run's ``analysis_state`` says how far it got, committed on its own: "running" while
    it reads, "done", or "failed" with the reason (an exception, or an interrupted process).
    """
    with session_scope() as session:
        run = session.get(Run, run_id)
        if run is None:
            raise LookupError(f"no run {run_id}")
        repository = session.get(Repository, run.repository_id)
        assert repository is not None
        commit = session.get(Commit, run.commit_id)
        assert commit is not None
        clone_url, repository_id, sha = repository.clone_url, run.repository_id, commit.sha
        run.analysis_state, run.analysis_error = AnalysisState.RUNNING, ""
        session.add(run)
    try:
        mirror = _mirror(clone_url, sha)  # outside any transaction; fetched only if the run's commit is not in it
        with session_scope() as session:
            summary = analyze_run(session, run_id, _commits_between(mirror, clone_url))
            steps = follow_ups(session, repository_id)
            run = session.get(Run, run_id)
            assert run is not None
            run.analysis_state = AnalysisState.DONE
            session.add(run)
    except BaseException as exc:
        _analysis_failed(run_id, "interrupted" if isinstance(exc, KeyboardInterrupt)
                         else f"{type(exc).__name__}: {exc}")
        raise
    log.info("run %s: %d change(s), %d fixed, %d follow-up(s)", run_id, len(summary.changes),
             len(summary.fixed), len(steps))
    start(steps)
    return summary


def _analysis_failed(run_id: int, reason: str) -> None:
    try:
        with session_scope() as session:
            run = session.get(Run, run_id)
            if run is not None:
                run.analysis_state, run.analysis_error = AnalysisState.FAILED, reason[:2000]
                session.add(run)
    except Exception:  # the database itself may be what failed: the original error is raised
        log.exception("run %s: could not record that its analysis failed", run_id)


def after_confirmation(comparison_id: int) -> list[int]:
    """Decide the candidates a confirmation A/B measured, then start what is left to do."""
    with session_scope() as session:
        confirmed = confirmation.apply(session, comparison_id)
        comparison = session.get(Comparison, comparison_id)
        steps = follow_ups(session, comparison.repository_id) if comparison else []
    log.info("comparison %s: %d change(s) confirmed", comparison_id, len(confirmed))
    start(steps)
    return confirmed


def follow_ups(session: Session, repository_id: int) -> list[FollowUp]:
    return [*narrowing.next_steps(session, repository_id), *confirmation.pending(session, repository_id)]


def start(steps: list[FollowUp]) -> None:
    """Create and submit each follow-up once; failures are logged and never break the caller."""
    for step in dict.fromkeys(steps):
        try:
            if isinstance(step, Confirm):
                _confirm(step)
            else:
                _bisect(step)
        except RoofwatchError as exc:
            log.warning("follow-up %s not started: %s", step, exc)


def _mirror(clone_url: str, sha: str) -> Path:
    return checkout.mirror_holding(get_settings().mirrors_dir, clone_url, sha)


def _commits_between(mirror: Path, clone_url: str) -> Callable[[str, str], list[str]]:
    """The first-parent commits of ``good..bad`` in the mirror; fetched once more only if it lacks one.

    Every measured commit came through a flow that fetched it, so the mirror nearly always has
    the range; a commit measured elsewhere and never fetched here is the exception.
    """
    def between(good: str, bad: str) -> list[str]:
        try:
            return checkout.rev_range(mirror, f"{good}..{bad}")
        except UnknownRevision:
            checkout.ensure_mirror(get_settings().mirrors_dir, clone_url)
            return checkout.rev_range(mirror, f"{good}..{bad}")
    return between


def _confirm(request: Confirm) -> None:
    with session_scope() as session:
        repository = session.get(Repository, request.repository_id)
        device = session.get(Device, request.device_id)
        assert repository is not None and device is not None
        key = confirmation.key_for(repository, device, request)
        if session.exec(select(Comparison).where(Comparison.idempotency_key == key)).first():
            return
        good = find_commit(session, request.repository_id, request.good_sha)
        bad = find_commit(session, request.repository_id, request.bad_sha)
        assert good is not None and bad is not None  # both ends of a candidate were measured
        named = confirmation.around(session, request)
        _, job = ab.prepare(session, repository, good, bad, key, purpose=confirmation.PURPOSE,
                            only=confirmation.candidate_keys(session, request),
                            details={"around": list(named)} if named else None)
        device_class = device.device_class
    log.info("confirming %s..%s on %s by A/B (comparison %s, attempt %d)", request.good_sha[:12],
             request.bad_sha[:12], device_class, job.comparison_id, request.attempt)
    ab.start(job, device_class, then=TaskName.CONFIRM_CHANGES)


def _bisect(request: Bisect) -> None:
    settings = get_settings()
    with session_scope() as session:
        repository = session.get(Repository, request.repository_id)
        device = session.get(Device, request.device_id)
        assert repository is not None and device is not None
        key = bisect_key(repository, request.sha, device.fingerprint, request.attempt)
        if session.exec(select(Run).where(Run.idempotency_key == key)).first():
            return
        commit = find_commit(session, request.repository_id, request.sha)
        clone_url = repository.clone_url
    info = None if commit is not None else checkout.commit_info(_mirror(clone_url, request.sha), request.sha)
    with session_scope() as session:
        repository = session.get(Repository, request.repository_id)
        assert repository is not None
        commit = (upsert_commit(session, repository, info) if info is not None
                  else find_commit(session, request.repository_id, request.sha))
        assert commit is not None
        run = create_run(session, repository, commit, key, trigger=Trigger.BISECT)
        job = job_for(run, repository, commit, settings)
        queue = queue_name(device.device_class)
    log.info("narrowing: measuring %s on %s (run %s)", request.sha[:12], queue, job.run_id)
    submit(job, queue)
