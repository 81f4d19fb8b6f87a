"""The push flow: measure a pushed head of a tracked branch and show the run on the commit.

The run goes through the same chain as ``roofwatch run`` (measure → ingest → analyze), so
change-point detection, confirmation and bisection follow on their own; the commit status
says whether the suites passed and links to the run. Performance changes on the branch are
confirmed later by A/B and appear on the dashboard and in ``roofwatch regressions``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlmodel import select

from roofwatch.common.task_names import queue_name
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
from roofwatch.service.records.changes import shown
from roofwatch.service.records.runs import create_run, upsert_commit
from roofwatch.workers import checkout

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PushedHead:
    repository_id: int
    branch: str
    sha: str


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
    except (CheckoutError, PullRequestError) as exc:
        raise PullRequestError(str(exc)) from exc
    device = device_class()
    with session_scope() as session:
        repository = session.get(Repository, push.repository_id)
        assert repository is not None
        commit = upsert_commit(session, repository, info)
        key = push_run_key(repository.full_name, push.sha, device)
        if session.exec(select(Run.id).where(Run.idempotency_key == key)).first() is not None:
            log.info("%s@%s: already measured for a push", repository.full_name, push.sha[:12])
            return None
        run = create_run(session, repository, commit, key, trigger="push")
        job = job_for(run, repository, commit, settings)
        report_ids = reporting.show_phase(session, repository, push.sha, "queued",
                                          f"queued: {push.branch} on {device}", run_url(run.id))  # type: ignore[arg-type]
    reporting.send(report_ids)
    submit(job, queue_name(device), then=dispatch.then_report_run(job.run_id))
    return job.run_id


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def summary_of(run: Run, passed: int, failed: int, benchmarks: int, failures: list[str]) -> Summary:
    """The commit status of a measured push: correctness decides, timings are reported."""
    measured = f"{_count(benchmarks, 'benchmark')} measured"
    if failures:
        return Summary("failure", f"{_count(len(failures), 'new test failure')}: {failures[0]}")
    if run.state == "errored":
        return Summary("failure", f"could not measure: {run.error or 'the run errored'}")
    if run.state == "failed":
        return Summary("failure", f"{failed} failing, {_count(passed, 'test')} passed · {measured}")
    return Summary("success", f"{_count(passed, 'test')} passed · {measured}")


def report(run_id: int) -> None:
    with session_scope() as session:
        run = session.get(Run, run_id)
        if run is None or run.trigger != "push":
            return
        repository = session.get(Repository, run.repository_id)
        assert repository is not None
        outcomes = session.exec(select(TestOutcome.outcome).where(TestOutcome.run_id == run_id)).all()
        benchmarks = len(session.exec(select(Measurement.id).where(Measurement.run_id == run_id)).all())
        failures = [c.test_id or "" for c in session.exec(select(Change).where(
            Change.detected_run_id == run_id, Change.kind == "correctness-failure", shown())).all()]
        summary = summary_of(run, sum(o == "passed" for o in outcomes),
                             sum(o in ("failed", "error") for o in outcomes), benchmarks, failures)
        commit = session.get(Commit, run.commit_id)
        assert commit is not None
        ids = reporting.show_summary(session, repository, commit.sha, summary, run_url(run_id))
    reporting.send(ids)
