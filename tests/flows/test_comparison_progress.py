"""A round's progress notice moves a running comparison on, and never writes over its verdict.

The notice comes from the worker after each round and is handled on its own lane; the verdict is
stored by another transaction. A notice that read the comparison just before the verdict committed
used to write "running" over it, and a pull request's check ended ``pending`` after its verdict.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlmodel import select

from roofwatch.service.core.db import get_engine, migrate, session_scope
from roofwatch.service.core.models import Commit, Comparison, GitHubReport, Repository, Run, utcnow
from roofwatch.service.flows import comparison_progress

HEAD = "8e0b7d2" + "1" * 33


@pytest.fixture
def running_pull_request(database_url: str, roofwatch_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A pull request's run with its comparison under way; reports recorded, none sent."""
    from support.environment import _reset_caches

    monkeypatch.setenv("ROOFWATCH_DATABASE_URL", database_url)
    monkeypatch.setenv("ROOFWATCH_GITHUB_TOKEN", "ghp_" + "x" * 36)
    # delivery is not what is tested here: the outbox row is the state GitHub is to show
    monkeypatch.setattr(comparison_progress.reporting, "send", lambda ids: None)
    _reset_caches()
    migrate()
    with session_scope() as session:
        # PostgreSQL's database is shared by the tests of a worker: every name here is this test's own
        unique = uuid.uuid4().hex[:12]
        repository = Repository(full_name=f"acme/kernels-{unique}", clone_url="/src")
        session.add(repository)
        session.flush()
        base, head = Commit(repository_id=repository.id, sha="3" * 40), Commit(repository_id=repository.id, sha=HEAD)  # type: ignore[arg-type]
        session.add_all([base, head])
        session.flush()
        run = Run(repository_id=repository.id, commit_id=head.id, trigger="pull_request", state="running",  # type: ignore[arg-type]
                  idempotency_key=f"pr-{unique}")
        session.add(run)
        session.flush()
        comparison = Comparison(repository_id=repository.id, base_commit_id=base.id, head_commit_id=head.id,  # type: ignore[arg-type]
                                purpose="pull_request", idempotency_key=f"c-{unique}", run_id=run.id, state="running",
                                details={"max_rounds": 10})
        session.add(comparison)
        session.flush()
        comparison_id = comparison.id
    assert comparison_id is not None
    yield comparison_id
    _reset_caches()


def _status(comparison_id: int) -> dict[str, object] | None:
    with session_scope() as session:
        comparison = session.get(Comparison, comparison_id)
        assert comparison is not None
        row = session.exec(select(GitHubReport).where(GitHubReport.repository_id == comparison.repository_id,
                                                      GitHubReport.target == "status",
                                                      GitHubReport.subject == HEAD)).first()
        return dict(row.payload) if row is not None else None


def test_a_round_moves_the_comparison_and_the_check_on(running_pull_request: int) -> None:
    comparison_progress.record(running_pull_request, 2, ["test_b", "test_a"], 4.0, 32.0)
    with session_scope() as session:
        comparison = session.get(Comparison, running_pull_request)
        assert comparison is not None and comparison.rounds == 2 and comparison.state == "running"
        progress = comparison.details["progress"]
        assert progress["open"] == ["test_a", "test_b"] and progress["open_count"] == 2
    status = _status(running_pull_request)
    assert status is not None and status["state"] == "pending"
    assert status["description"] == "running: round 2 of at most 10 done, 2 benchmarks open, about 32.0 s left"


def test_a_notice_after_the_verdict_changes_nothing(running_pull_request: int) -> None:
    with session_scope() as session:
        comparison = session.get(Comparison, running_pull_request)
        assert comparison is not None
        comparison.state, comparison.finished_at, comparison.rounds = "succeeded", utcnow(), 5
        session.add(comparison)
    comparison_progress.record(running_pull_request, 4, ["test_a"], 4.0, 8.0)
    with session_scope() as session:
        comparison = session.get(Comparison, running_pull_request)
        assert comparison is not None and (comparison.state, comparison.rounds) == ("succeeded", 5)
    assert _status(running_pull_request) is None


def test_a_notice_racing_the_verdict_never_writes_over_it(running_pull_request: int) -> None:
    # The verdict's transaction is open when the notice arrives, and commits while the notice waits.
    with get_engine().connect() as verdict:
        verdict.execute(text("UPDATE comparison SET state = 'succeeded', rounds = 5, finished_at = :now "
                             "WHERE id = :id"), {"now": utcnow(), "id": running_pull_request})
        notice = threading.Thread(target=comparison_progress.record,
                                  args=(running_pull_request, 4, ["test_a"], 4.0, 8.0))
        notice.start()
        time.sleep(1.0)  # the notice reads (and, before the fix, wrote) while the verdict is uncommitted
        verdict.commit()
    notice.join(60)
    assert not notice.is_alive()
    with session_scope() as session:
        comparison = session.get(Comparison, running_pull_request)
        assert comparison is not None and (comparison.state, comparison.rounds) == ("succeeded", 5)
    assert _status(running_pull_request) is None
