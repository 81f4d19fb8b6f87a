"""Progress lines name what is measured: its own commits and purpose, not the commit the user asked for."""

from __future__ import annotations

from pathlib import Path

import pytest

from roofwatch.service.cli.progress import Purposes, describe
from roofwatch.workers.activity import Activity, announce, local_activity

GOOD, BAD = "3f2a9c1" + "0" * 33, "8e0b7d2" + "1" * 33


@pytest.mark.parametrize(("activity", "purpose", "own", "line"), [
    (Activity("comparison", 4, (GOOD, BAD), "benchmarks", "start", round=3, rounds=8, side="head"), "confirm", None,
     "confirm 3f2a9c1..8e0b7d2 · round 3/8 · head benchmarks: running"),
    (Activity("comparison", 4, (GOOD, BAD), "benchmarks", "succeeded", round=8, rounds=8, side="base"), "manual", None,
     "manual 3f2a9c1..8e0b7d2 · round 8/8 · base benchmarks: succeeded"),
    (Activity("run", 9, (BAD,), "correctness", "failed"), "bisect", None,
     "bisect 8e0b7d2 (narrowing) · correctness: failed"),
    (Activity("run", 9, (BAD,), "benchmarks", "start"), "nightly", None, "nightly 8e0b7d2 · benchmarks: running"),
    # The user's own commit keeps the label the run command gave it (SHA and title).
    (Activity("run", 2, (GOOD,), "benchmarks", "start"), "manual", "3f2a9c10000 Faster softmax",
     "3f2a9c10000 Faster softmax · benchmarks: running"),
])
def test_lines(activity: Activity, purpose: str, own: str | None, line: str) -> None:
    assert describe(activity, purpose, own) == line


def test_announcements_reach_the_listener_of_this_context_only() -> None:
    heard: list[Activity] = []
    announce(Activity("run", 1, (GOOD,), "benchmarks", "start"))  # nobody listening: no error
    token = local_activity.set(heard.append)
    try:
        announce(Activity("run", 1, (GOOD,), "benchmarks", "start"))
    finally:
        local_activity.reset(token)
    announce(Activity("run", 2, (GOOD,), "benchmarks", "start"))
    assert [a.id for a in heard] == [1]


def test_purposes_come_from_the_run_and_the_comparison(roofwatch_env: Path) -> None:
    from roofwatch.service.core.db import migrate, session_scope
    from roofwatch.service.core.models import Commit, Comparison, Repository, Run

    migrate()
    with session_scope() as session:
        repository = Repository(full_name="acme/kernels", clone_url="/src")
        session.add(repository)
        session.flush()
        good, bad = Commit(repository_id=repository.id, sha=GOOD), Commit(repository_id=repository.id, sha=BAD)  # type: ignore[arg-type]
        session.add_all([good, bad])
        session.flush()
        run = Run(repository_id=repository.id, commit_id=bad.id, trigger="bisect", idempotency_key="k")  # type: ignore[arg-type]
        comparison = Comparison(repository_id=repository.id, base_commit_id=good.id, head_commit_id=bad.id,  # type: ignore[arg-type]
                                purpose="confirm", idempotency_key="c")
        # a confirmation's search among the neighbours of a candidate named at two other commits
        search = Comparison(repository_id=repository.id, base_commit_id=good.id, head_commit_id=bad.id,  # type: ignore[arg-type]
                            purpose="confirm", idempotency_key="s", details={"around": ["5" * 40, "6" * 40]})
        session.add_all([run, comparison, search])
        session.flush()
        run_id, comparison_id, search_id = run.id, comparison.id, search.id
    purposes = Purposes()
    assert purposes(Activity("run", run_id, (BAD,), "benchmarks", "start")) == "bisect"  # type: ignore[arg-type]
    assert purposes(Activity("comparison", comparison_id, (GOOD, BAD), "benchmarks", "start",  # type: ignore[arg-type]
                             round=1, rounds=8, side="base")) == "confirm"
    activity = Activity("comparison", search_id, (GOOD, BAD), "benchmarks", "start", round=1, rounds=8,  # type: ignore[arg-type]
                        side="base")
    assert describe(activity, purposes(activity)) == (
        "seek the step named at 5555555..6666666 across 3f2a9c1..8e0b7d2 · round 1/8 · base benchmarks: running")
