"""The dashboard-at-scale benchmark's plumbing, on a small seeded PostgreSQL database.

Timing targets are checked by ``python -m bench.dashboard.pages`` on the full 2 M-measurement
dataset, never here: this checks that the seed writes what it says (and leaves the sequences and
indexes right) and that every page the benchmark would time answers 200.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from rich.console import Console
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlmodel import Session

from bench.dashboard.pages import discover, make_app, measure, route_exists
from bench.dashboard.seed import correctness_tests, make_plan, seed
from roofwatch.service.core.models import SERIES_COLUMNS, Repository
from roofwatch.service.records import latest

BENCHMARKS, COMMITS = 20, 50


@pytest.fixture
def bench_url(postgres_url: str) -> Iterator[str]:
    """A database of its own: the session's ``postgres_url`` one is shared with tests that expect it empty."""
    name = f"roofwatch_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def app_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``make_app`` points the cached settings and engine at a database; undo that afterwards."""
    from roofwatch.service.core.config import get_settings
    from roofwatch.service.core.db import forget_engine

    monkeypatch.setenv("ROOFWATCH_DATABASE_URL", "unset")  # restored (removed) at teardown
    yield
    forget_engine()
    get_settings.cache_clear()


def _counts(url: str) -> dict[str, int]:
    engine = create_engine(url)
    tables = ("repository", "commit", "device", "run", "suiteexecution", "benchmark", "measurement", "testoutcome",
              "change", "comparison", "comparisonresult", "latestmeasurement")
    with engine.connect() as connection:
        counts = {t: int(connection.execute(text(f'SELECT count(*) FROM "{t}"')).scalar_one()) for t in tables}
    engine.dispose()
    return counts


@pytest.mark.postgres
def test_seed_writes_a_consistent_history_and_every_page_answers(bench_url: str, app_env: None) -> None:
    report = seed(bench_url, BENCHMARKS, COMMITS, seed_value=0, console=Console(quiet=True))

    counts = _counts(bench_url)
    assert counts == report.rows
    assert counts["repository"] == 1 and counts["device"] == 2 and counts["benchmark"] == BENCHMARKS
    assert counts["commit"] == counts["run"] == COMMITS and counts["suiteexecution"] == 2 * COMMITS
    assert counts["measurement"] == BENCHMARKS * COMMITS
    assert counts["testoutcome"] == COMMITS * len(correctness_tests(make_plan(BENCHMARKS, COMMITS, 0, 2)))
    assert counts["change"] > 0 and counts["comparison"] >= 2
    assert counts["comparisonresult"] == counts["comparison"] * BENCHMARKS
    # The seed writes each series' latest row itself; it is what ingest would have kept.
    assert counts["latestmeasurement"] == BENCHMARKS
    engine = create_engine(bench_url)
    latest_rows = "SELECT * FROM latestmeasurement ORDER BY benchmark_id"
    with Session(engine) as session:
        seeded = session.execute(text(latest_rows)).all()
        latest.rebuild(session)
        assert session.execute(text(latest_rows)).all() == seeded
        session.rollback()
    engine.dispose()

    engine = create_engine(bench_url)
    with engine.connect() as connection:
        # Consistent with the devices' roofs: ingest would refuse a time faster than the roofline.
        low, high = connection.execute(text("SELECT min(roofline_fraction), max(roofline_fraction) "
                                            "FROM measurement")).one()
        assert 0 < low <= high <= 1
        # Alembic's model comparison does not look at INCLUDE, so check the covering index here.
        index = connection.execute(text("SELECT indexdef FROM pg_indexes "
                                        "WHERE indexname = 'ix_measurement_benchmark_run'")).scalar_one()
        assert all(column in index for column in SERIES_COLUMNS), index
    with Session(engine) as session:
        # COPY wrote explicit ids; the sequences must continue after them.
        extra = Repository(full_name="acme/other", clone_url="https://example.invalid/other.git")
        session.add(extra)
        session.flush()
        assert extra.id == 2
        session.rollback()
    engine.dispose()

    app = make_app(bench_url)
    client = TestClient(app)
    with Session(create_engine(bench_url)) as session:
        pages = discover(session)
    assert not [p.url for p in pages if not route_exists(app, p.path)]
    for page in pages:
        assert client.get(page.url).status_code == 200, page

    # The timing loop itself, over a real uvicorn server; how fast is not this test's business.
    timings = measure(app, pages[:2], requests=1, budget_s=30, console=Console(quiet=True))
    assert [t.status in ("pass", "FAIL") and len(t.times_ms) == 1 for t in timings] == [True, True]


@pytest.mark.postgres
def test_seed_refuses_a_database_that_holds_data(bench_url: str) -> None:
    seed(bench_url, 2, 10, console=Console(quiet=True))
    with pytest.raises(SystemExit, match="already holds data"):
        seed(bench_url, 2, 10, console=Console(quiet=True))
    assert _counts(bench_url)["measurement"] == 20
