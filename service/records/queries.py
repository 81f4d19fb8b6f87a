"""Read-only queries shared by the API, the CLI and the dashboard."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select as sa_select
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from roofwatch.service.core.models import Benchmark, Change, Commit, Comparison, Device, Measurement, Repository, Run
from roofwatch.service.records.changes import shown


def _title(message: str | None) -> str:
    return message.splitlines()[0] if message else ""


# These read columns, never ORM entities: building a SQLModel object costs ~25 µs (pydantic
# private-attribute setup), so a 2,000-point series loaded as (Measurement, Run, Commit) spent
# ~100 ms constructing 6,000 objects, and Measurement.samples (a JSON list) was parsed unread.


def change_rows(session: Session, repository_id: int | None = None) -> list[dict[str, Any]]:
    """Changes in the ``regressions --format json`` contract (DESIGN §4).

    One query: the benchmark and first bad commit come from outer joins, not a ``session.get``
    per change (two round trips each, ~900 on a repository with 450 changes).
    """
    query = (
        sa_select(col(Change.id), col(Repository.full_name), col(Benchmark.name), col(Benchmark.device_class),
                  col(Commit.sha), col(Change.test_id), col(Change.suite), col(Change.kind),
                  col(Change.range_start_sha), col(Change.range_end_sha), col(Change.change_pct),
                  col(Change.ci_low), col(Change.ci_high), col(Change.p_value), col(Change.state),
                  col(Change.details))
        .join(Repository, col(Change.repository_id) == col(Repository.id))
        .outerjoin(Benchmark, col(Change.benchmark_id) == col(Benchmark.id))
        .outerjoin(Commit, col(Change.first_bad_commit_id) == col(Commit.id))
        .where(shown())
        .order_by(col(Change.id))
    )
    if repository_id is not None:
        query = query.where(col(Change.repository_id) == repository_id)
    return [
        {
            "id": row.id,
            "repository": row.full_name,
            "benchmark": row.name if row.name is not None else row.test_id,
            "suite": row.suite,
            "kind": row.kind,
            "commit": row.sha,
            "range": None if row.sha is not None else f"{row.range_start_sha or ''}..{row.range_end_sha or ''}",
            "change_pct": row.change_pct,
            "ci_low": row.ci_low,
            "ci_high": row.ci_high,
            "p_value": row.p_value,
            "state": row.state,
            "device_class": row.device_class,
            "details": row.details,
        }
        for row in session.execute(query)
    ]


def series(session: Session, benchmark_id: int) -> list[dict[str, Any]]:
    """One benchmark's measurements in branch order (first-parent position), oldest first.

    Every column read from ``measurement`` is in ``ix_measurement_benchmark_run``, so PostgreSQL
    answers from the index alone: ~15 index pages instead of one heap page per point (a series'
    rows are spread over the whole table, one run's worth of rows apart).
    """
    points = session.execute(
        sa_select(col(Run.id).label("run_id"), col(Commit.sha), col(Commit.message), col(Commit.author),
                  col(Commit.committed_at), col(Measurement.median), col(Measurement.iqr), col(Measurement.min),
                  col(Measurement.n), col(Measurement.cv), col(Measurement.achieved_flops),
                  col(Measurement.achieved_bandwidth), col(Measurement.roofline_fraction))
        .select_from(Measurement)
        .join(Run, col(Measurement.run_id) == col(Run.id))
        .join(Commit, col(Run.commit_id) == col(Commit.id))
        .where(col(Measurement.benchmark_id) == benchmark_id)
        .order_by(col(Commit.position).is_not(None), col(Commit.position), col(Run.id))
    )
    return [
        {
            "run_id": p.run_id, "sha": p.sha, "title": _title(p.message), "author": p.author,
            "committed_at": p.committed_at, "median": p.median, "iqr": p.iqr, "min": p.min, "n": p.n, "cv": p.cv,
            "achieved_flops": p.achieved_flops, "achieved_bandwidth": p.achieved_bandwidth,
            "roofline_fraction": p.roofline_fraction,
        }
        for p in points
    ]


def benchmarks(session: Session, repository_id: int | None = None) -> list[Benchmark]:
    query = select(Benchmark).order_by(col(Benchmark.suite), col(Benchmark.name))
    if repository_id is not None:
        query = query.where(Benchmark.repository_id == repository_id)
    return list(session.exec(query).all())


def recent_runs(session: Session, repository_id: int | None = None, limit: int = 50) -> list[dict[str, Any]]:
    query = (sa_select(col(Run.id), col(Repository.full_name), col(Commit.sha), col(Commit.message), col(Run.state),
                       col(Run.trigger), col(Run.error), col(Run.created_at), col(Run.started_at),
                       col(Run.finished_at), col(Run.device_id))
             .join(Commit, col(Run.commit_id) == col(Commit.id))
             .join(Repository, col(Run.repository_id) == col(Repository.id))
             .order_by(col(Run.id).desc()).limit(limit))
    if repository_id is not None:
        query = query.where(col(Run.repository_id) == repository_id)
    return [
        {"id": run.id, "repository": run.full_name, "sha": run.sha, "title": _title(run.message), "state": run.state,
         "trigger": run.trigger, "error": run.error, "created_at": run.created_at,
         "started_at": run.started_at, "finished_at": run.finished_at, "device_id": run.device_id}
        for run in session.execute(query)
    ]


def recent_comparisons(session: Session, repository_id: int | None = None, limit: int = 10) -> list[dict[str, Any]]:
    """The newest A/B comparisons (pull requests, `roofwatch compare`, confirmations), newest first."""
    base, head = aliased(Commit), aliased(Commit)
    query: Any = (sa_select(col(Comparison.id), col(Repository.full_name), col(Comparison.purpose), col(Comparison.state),
                       col(Comparison.verdict), col(Comparison.rounds), col(base.sha).label("base_sha"),
                       col(head.sha).label("head_sha"), col(head.message).label("head_message"))
             .join(Repository, col(Comparison.repository_id) == col(Repository.id))
             .join(base, col(Comparison.base_commit_id) == col(base.id))
             .join(head, col(Comparison.head_commit_id) == col(head.id))
             .order_by(col(Comparison.id).desc()).limit(limit))
    if repository_id is not None:
        query = query.where(col(Comparison.repository_id) == repository_id)
    return [{"id": row.id, "repository": row.full_name, "purpose": row.purpose, "state": row.state,
             "verdict": row.verdict, "rounds": row.rounds, "base_sha": row.base_sha, "head_sha": row.head_sha,
             "title": _title(row.head_message)} for row in session.execute(query)]


def devices(session: Session) -> list[Device]:
    return list(session.exec(select(Device).order_by(col(Device.id))).all())
