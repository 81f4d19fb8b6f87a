"""The push flow: measure a pushed head of a tracked branch and show the run on the commit.

The run goes through the same chain as ``roofwatch run`` (measure → ingest → analyze), so
change-point detection, confirmation and bisection follow on their own; the commit status
says whether the suites passed and links to the run. Performance changes on the branch are
confirmed later by A/B and appear on the dashboard and in ``roofwatch regressions``.

A push to another tracked branch (``ROOFWATCH_PUSH_BRANCHES``) is measured and reported the same
way, as a run of that branch (``Run.branch``): never a point of the default branch's history.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from sqlmodel import select

from roofwatch.common.task_names import queue_name
from roofwatch.common.vocabulary import ChangeKind, RunState, Trigger
from roofwatch.git import checkout
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.errors import CheckoutError
from roofwatch.service.core.keys import push_run_key
from roofwatch.service.core.links import run_url
from roofwatch.service.core.models import Change, Commit, Measurement, Repository, Run, TestOutcome
from roofwatch.service.flows import dispatch
from roofwatch.service.flows.measure import job_for, submit
from roofwatch.service.flows.pull_request import PullRequestError, device_class
from roofwatch.service.github import reporting
from roofwatch.service.github.comment import Summary
from roofwatch.service.records.changes import members, shown, test_name
from roofwatch.service.records.runs import create_run, upsert_commit

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PushedHead:
    repository_id: int
    branch: str
    sha: str
    # The default branch's name when ``branch`` is another branch; "" for a push to the default branch.
    default_branch: str = ""


def start(push: PushedHead) -> int | None:
    """Create and submit the run of a pushed head; None when that head already has one."""
    settings = get_settings()
    with session_scope() as session:
        repository = session.get(Repository, push.repository_id)
        assert repository is not None
    try:
        mirror = checkout.ensure_mirror(settings.mirrors_dir, repository.clone_url)
        if not checkout.has_commit(mirror, push.sha):
            raise PullRequestError(f"pushed commit {push.sha[:12]} is not in {repository.full_name}")
        info = checkout.commit_info(mirror, push.sha)
        base = _left_default_at(mirror, push)
    except (CheckoutError, PullRequestError) as exc:
        raise PullRequestError(str(exc)) from exc
    device = device_class()
    with session_scope() as session:
        repository = session.get(Repository, push.repository_id)
        assert repository is not None
        commit = upsert_commit(session, repository, info)
        off = push.branch if push.default_branch else ""
        key = push_run_key(repository.full_name, push.sha, device, branch=off)
        if session.exec(select(Run.id).where(Run.idempotency_key == key)).first() is not None:
            log.info("%s@%s: already measured for a push", repository.full_name, push.sha[:12])
            return None
        run = create_run(session, repository, commit, key, trigger=Trigger.PUSH, branch=off,
                         base_sha=base if off else None)
        job = job_for(run, repository, commit, settings)
        report_ids = reporting.show_phase(session, repository, push.sha, "queued",
                                          f"queued: {push.branch} on {device}", run_url(run.id))  # type: ignore[arg-type]
    reporting.send(report_ids)
    submit(job, queue_name(device), then=dispatch.then_report_run(job.run_id))
    return job.run_id


def _left_default_at(mirror: Path, push: PushedHead) -> str | None:
    """Where a pushed branch left the default branch (its merge-base), when it is another branch."""
    if not push.default_branch:
        return None
    try:
        return checkout.merge_base(mirror, f"refs/heads/{push.default_branch}", push.sha)
    except CheckoutError:
        return None


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def summary_of(run: Run, passed: int, failed: int, benchmarks: int, failures: list[str]) -> Summary:
    """The commit status of a measured push: correctness decides, timings are reported."""
    measured = f"{_count(benchmarks, 'benchmark')} measured"
    if failures:
        return Summary("failure", f"{_count(len(failures), 'new test failure')}: {failures[0]}")
    if run.state == RunState.ERRORED:
        return Summary("failure", f"could not measure: {run.error or 'the run errored'}")
    if run.state == RunState.FAILED:
        return Summary("failure", f"{failed} failing, {_count(passed, 'test')} passed · {measured}")
    return Summary("success", f"{_count(passed, 'test')} passed · {measured}")


def _failure_name(change: Change) -> str:
    """``mod::test_x (11 parametrizations)`` for a function's failing parametrizations, else the test's id."""
    tests = members(change)
    name = test_name(change.test_id, change.details)
    return f"{name} ({len(tests)} parametrizations)" if len(tests) > 1 else name


def report(run_id: int) -> None:
    with session_scope() as session:
        run = session.get(Run, run_id)
        if run is None or run.trigger != Trigger.PUSH:
            return
        repository = session.get(Repository, run.repository_id)
        assert repository is not None
        outcomes = session.exec(select(TestOutcome.outcome).where(TestOutcome.run_id == run_id)).all()
        benchmarks = len(session.exec(select(Measurement.id).where(Measurement.run_id == run_id)).all())
        failures = [_failure_name(c) for c in session.exec(select(Change).where(
            Change.detected_run_id == run_id, Change.kind == ChangeKind.CORRECTNESS_FAILURE, shown())).all()]
        summary = summary_of(run, sum(o == "passed" for o in outcomes),
                             sum(o in ("failed", "error") for o in outcomes), benchmarks, failures)
        commit = session.get(Commit, run.commit_id)
        assert commit is not None
        ids = reporting.show_summary(session, repository, commit.sha, summary, run_url(run_id))
    reporting.send(ids)
