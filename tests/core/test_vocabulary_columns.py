"""A record's state, trigger, kind and analysis-state columns hold the vocabulary's words: stored as the plain strings they
always were, read back as members, refused on write when the vocabulary lacks them (0020 rewrote the one
word that was stored outside it)."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import StatementError
from sqlmodel import Session, select
from support.environment import engine_for

from roofwatch.common.vocabulary import AnalysisState, ChangeKind, RunState, TriageState, Trigger
from roofwatch.service.core.db import downgrade, migrate
from roofwatch.service.core.models import Change, Commit, Comparison, Repository, Run


def _run(session: Session, key: str, **fields: object) -> Run:
    """A run in a repository of its own (the PostgreSQL database is shared by the session's tests)."""
    repository = Repository(full_name=f"acme/{key}", clone_url="/x")
    session.add(repository)
    session.flush()
    commit = Commit(repository_id=repository.id, sha=key.ljust(40, "0")[:40], position=1)  # type: ignore[arg-type]
    session.add(commit)
    session.flush()
    run = Run(repository_id=repository.id, commit_id=commit.id, idempotency_key=key, **fields)  # type: ignore[arg-type]
    session.add(run)
    session.flush()
    return run


def test_words_are_stored_as_plain_strings_and_read_back_as_members(database_url: str) -> None:
    migrate(database_url)
    engine = engine_for(database_url)
    with Session(engine) as session:
        run = _run(session, "words-1", trigger=Trigger.PUSH, state=RunState.RUNNING,
                   analysis_state=AnalysisState.FAILED)
        unread = _run(session, "words-1b")  # the default: not read into a history
        change = Change(repository_id=run.repository_id, kind=ChangeKind.NUMERICS_DRIFT, state=TriageState.EXPECTED)
        comparison = Comparison(repository_id=run.repository_id, base_commit_id=run.commit_id,
                                head_commit_id=run.commit_id, idempotency_key="words-cmp", state=RunState.FAILED)
        session.add_all([change, comparison])
        session.commit()
        stored = session.connection().execute(text(
            "SELECT r.\"trigger\", r.state, r.analysis_state, u.analysis_state, c.kind, c.state, m.state "
            "FROM run r, run u, \"change\" c, comparison m WHERE r.id = :r AND u.id = :u AND c.id = :c AND m.id = :m"),
            {"r": run.id, "u": unread.id, "c": change.id, "m": comparison.id}).one()
        assert tuple(stored) == ("push", "running", "failed", "", "numerics-drift", "expected", "failed")
        assert all(type(word) is str for word in stored)  # the schema and the rows are what they were

    with Session(engine) as session:  # read back fresh, not from the identity map
        run = session.exec(select(Run).where(Run.idempotency_key == "words-1")).one()
        change = session.exec(select(Change).where(Change.repository_id == run.repository_id)).one()
        comparison = session.exec(select(Comparison).where(Comparison.idempotency_key == "words-cmp")).one()
        assert (run.trigger, run.state, change.kind, change.state, comparison.state) == (
            Trigger.PUSH, RunState.RUNNING, ChangeKind.NUMERICS_DRIFT, TriageState.EXPECTED, RunState.FAILED)
        assert type(run.state) is RunState and type(change.kind) is ChangeKind
        assert run.analysis_state is AnalysisState.FAILED
        assert session.exec(select(Run.analysis_state).where(Run.idempotency_key == "words-1b")).one() is \
            AnalysisState.NOT_READ
        # a query binds a member or its plain string alike
        assert session.exec(select(Run.id).where(Run.state == "running", Run.trigger == Trigger.PUSH)).one() == run.id
    engine.dispose()


def test_a_word_the_vocabulary_lacks_is_refused_where_it_is_written(database_url: str) -> None:
    migrate(database_url)
    engine = engine_for(database_url)
    with Session(engine) as session, pytest.raises(StatementError, match="'nightly' is not a valid Trigger"):
        _run(session, "words-2", trigger="nightly")
    engine.dispose()


def test_a_word_already_stored_outside_the_vocabulary_reads_back_as_it_is(database_url: str) -> None:
    """Written by hand (or by something older than the migrations): a page shows it, never a 500."""
    migrate(database_url)
    engine = engine_for(database_url)
    with Session(engine) as session:
        run = _run(session, "words-3")
        session.commit()
        session.connection().execute(text("UPDATE run SET state = 'paused' WHERE id = :id"), {"id": run.id})
        session.commit()
    with Session(engine) as session:
        assert session.exec(select(Run.state).where(Run.idempotency_key == "words-3")).one() == "paused"
    engine.dispose()


def test_0020_makes_stored_nightly_runs_scheduled_ones_and_back(database_url: str) -> None:
    """The nightly flow stored ``trigger = "nightly"``, which no rule read: its runs were never points of the
    branch's history. 0020 rewrites them to the vocabulary's ``schedule``; going back restores exactly those."""
    migrate(database_url)
    downgrade(database_url, "0019")
    engine = engine_for(database_url)
    keys = {"acme/w0020@a:cpu:nightly:2026-11-27": "nightly", "acme/w0020@b:manual": "manual",
            "acme/w0020@c:cpu:schedule": "schedule"}
    with engine.begin() as connection:
        repository = connection.execute(text(
            "INSERT INTO repository (full_name, clone_url, default_branch, trust_policy, created_at) "
            "VALUES ('acme/w0020', '/x', 'main', 'everyone', CURRENT_TIMESTAMP) RETURNING id")).scalar_one()
        for position, (key, trigger) in enumerate(keys.items(), start=1):
            commit = connection.execute(text(
                'INSERT INTO "commit" (repository_id, sha, parents, author, message, position) '
                "VALUES (:r, :sha, '[]', '', '', :p) RETURNING id"),
                {"r": repository, "sha": f"{position:040d}", "p": position}).scalar_one()
            connection.execute(text(
                'INSERT INTO run (repository_id, commit_id, "trigger", state, idempotency_key, log_excerpt, error, '
                "created_at, suites_source, analysis_state, analysis_error, branch) VALUES (:r, :c, :t, 'succeeded', "
                ":key, '', '', CURRENT_TIMESTAMP, '', '', '', '')"),
                {"r": repository, "c": commit, "t": trigger, "key": key})

    def triggers() -> dict[str, str]:
        with engine.connect() as connection:
            return dict(connection.execute(text('SELECT idempotency_key, "trigger" FROM run '
                                                "WHERE idempotency_key LIKE 'acme/w0020@%'")).all())

    migrate(database_url)
    assert triggers() == {**keys, "acme/w0020@a:cpu:nightly:2026-11-27": "schedule"}
    downgrade(database_url, "0019")
    assert triggers() == keys
    engine.dispose()
    migrate(database_url)
