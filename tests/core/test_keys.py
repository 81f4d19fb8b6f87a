"""Idempotency keys and dashboard links, each built in one place; key prefixes match literally."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from sqlalchemy import delete
from sqlmodel import col, select

from roofwatch.service.core import keys, links
from roofwatch.service.core.models import Commit, Comparison, Repository, Run

SHA, OTHER = "a" * 40, "b" * 40


def test_key_shapes() -> None:
    repository = Repository(full_name="acme/kernels", clone_url="/x")
    assert keys.manual_run_key("acme/kernels", SHA, "fp0", 2) == f"acme/kernels@{SHA}:fp0:manual:2"
    assert keys.push_run_key("acme/kernels", SHA, "NVIDIA H100") == f"acme/kernels@{SHA}:NVIDIA H100:push:0"
    assert keys.nightly_run_key("acme/kernels", SHA, "cpu", date(2026, 3, 1)) == f"acme/kernels@{SHA}:cpu:nightly:2026-03-01"
    assert keys.pull_request_run_key("acme/kernels", 7, SHA, 1) == f"acme/kernels#7@{SHA}:pull_request:1"
    assert keys.bisect_key(repository, SHA, "fp0", 3) == f"acme/kernels@{SHA}:fp0:bisect:3"
    assert keys.comparison_key(repository, SHA, OTHER, "fp0", "confirm") == f"acme/kernels@{SHA}..{OTHER}:fp0:confirm:0"
    # Every key is its prefix followed by the attempt number.
    assert keys.bisect_key(repository, SHA, "fp0", 5).startswith(keys.bisect_key_prefix(repository, SHA, "fp0"))
    assert keys.comparison_key(repository, SHA, OTHER, "fp0", "manual", 4) == (
        keys.comparison_key_prefix(repository, SHA, OTHER, "fp0", "manual") + "4")


# Names LIKE would confuse: `_` matches any one character, `%` any run of them, and SQLite's LIKE
# ignores ASCII case. Each pair differs exactly where a wildcard or a case would blur it.
NAMES = ["acme/fused_ops", "acme/fusedXops", "acme/fused%ops", "acme/fused%%ops", "acme/FUSED_ops", "acme/fused"]


@pytest.fixture
def keyed_rows(database_url: str, roofwatch_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Two manual runs and one manual comparison for each of NAMES, on SQLite and on PostgreSQL."""
    from support.environment import _reset_caches

    from roofwatch.service.core.db import migrate, session_scope

    monkeypatch.setenv("ROOFWATCH_DATABASE_URL", database_url)
    _reset_caches()
    migrate()
    with session_scope() as session:
        for name in NAMES:
            repository = Repository(full_name=name, clone_url=f"/src/{name}")
            session.add(repository)
            session.flush()
            base, head = (Commit(repository_id=repository.id, sha=sha) for sha in (SHA, OTHER))  # type: ignore[arg-type]
            session.add_all([base, head])
            session.flush()
            for attempt in range(2):
                session.add(Run(repository_id=repository.id, commit_id=head.id,  # type: ignore[arg-type]
                                idempotency_key=keys.manual_run_key(name, SHA, "fp0", attempt)))
            session.add(Comparison(repository_id=repository.id, base_commit_id=base.id,  # type: ignore[arg-type]
                                   head_commit_id=head.id,  # type: ignore[arg-type]
                                   idempotency_key=keys.comparison_key(repository, SHA, OTHER, "fp0", "manual")))
    yield
    # The PostgreSQL database is shared by the whole test session: leave it as it was.
    with session_scope() as session:
        ids = session.exec(select(Repository.id).where(col(Repository.full_name).in_(NAMES))).all()
        for model in (Comparison, Run, Commit):
            session.execute(delete(model).where(col(model.repository_id).in_(ids)))
        session.execute(delete(Repository).where(col(Repository.id).in_(ids)))

@pytest.mark.usefixtures("keyed_rows")
@pytest.mark.parametrize("name", NAMES)
def test_prefix_look_ups_match_the_name_literally(name: str) -> None:
    from roofwatch.service.core.db import session_scope

    with session_scope() as session:
        repository = session.exec(select(Repository).where(Repository.full_name == name)).one()
        prefix = keys.run_key_prefix(name, SHA, "fp0", "manual")
        runs = keys.with_key_prefix(session, Run, prefix)
        assert [run.idempotency_key for run in runs] == [f"{prefix}0", f"{prefix}1"]
        assert {run.repository_id for run in runs} == {repository.id}
        assert keys.next_attempt(session, Run, prefix) == 2
        compared = keys.comparison_key_prefix(repository, SHA, OTHER, "fp0", "manual")
        assert [c.repository_id for c in keys.with_key_prefix(session, Comparison, compared)] == [repository.id]
        assert keys.next_attempt(session, Comparison, compared) == 1
        assert keys.next_attempt(session, Comparison, keys.comparison_key_prefix(
            repository, SHA, OTHER, "fp0", "confirm")) == 0
        assert keys.next_attempt(session, Run, keys.run_key_prefix(name, OTHER, "fp0", "manual")) == 0


def test_links_are_absolute_on_the_public_url(monkeypatch: pytest.MonkeyPatch, roofwatch_env: Path) -> None:
    from roofwatch.service.core.config import get_settings

    monkeypatch.setenv("ROOFWATCH_PUBLIC_URL", "https://perf.example.com/roofwatch/")
    get_settings.cache_clear()
    assert links.run_url(12) == "https://perf.example.com/roofwatch/runs/12"
    assert links.compare_url(3) == "https://perf.example.com/roofwatch/compare/3"
    assert links.dashboard_url() == "https://perf.example.com/roofwatch/"
    with pytest.raises(ValueError, match="start with '/'"):
        links.dashboard_url("runs/1")
    get_settings.cache_clear()
