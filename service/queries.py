"""Read-only queries shared by the API, the CLI and the dashboard."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, select

from service.models import Benchmark, Change, Commit, Device, Measurement, Repository, Run


def change_rows(session: Session, repo: str | None = None) -> list[dict[str, Any]]:
    """Changes in the ``regressions --format json`` contract (DESIGN §4)."""
    query = select(Change, Repository).join(Repository, col(Change.repository_id) == col(Repository.id))
    if repo:
        query = query.where(Repository.full_name == repo)
    rows = []
    for change, repository in session.exec(query.order_by(col(Change.id))).all():
        benchmark = session.get(Benchmark, change.benchmark_id) if change.benchmark_id else None
        first_bad = session.get(Commit, change.first_bad_commit_id) if change.first_bad_commit_id else None
        rows.append({
            "id": change.id,
            "repository": repository.full_name,
            "benchmark": benchmark.name if benchmark else change.test_id,
            "suite": change.suite,
            "kind": change.kind,
            "commit": first_bad.sha if first_bad else None,
            "range": None if first_bad else f"{change.range_start_sha or ''}..{change.range_end_sha or ''}",
            "change_pct": change.change_pct,
            "ci_low": change.ci_low,
            "ci_high": change.ci_high,
            "p_value": change.p_value,
            "state": change.state,
            "device_class": benchmark.device_class if benchmark else None,
            "details": change.details,
        })
    return rows


def series(session: Session, benchmark_id: int) -> list[dict[str, Any]]:
    """One benchmark's measurements in commit order, oldest first."""
    query = (
        select(Measurement, Run, Commit)
        .join(Run, col(Measurement.run_id) == col(Run.id))
        .join(Commit, col(Run.commit_id) == col(Commit.id))
        .where(Measurement.benchmark_id == benchmark_id)
        .order_by(col(Commit.committed_at), col(Run.id))
    )
    return [
        {
            "run_id": run.id, "sha": commit.sha, "title": commit.message.splitlines()[0] if commit.message else "",
            "author": commit.author, "committed_at": commit.committed_at,
            "median": m.median, "iqr": m.iqr, "min": m.min, "n": m.n, "cv": m.cv,
            "achieved_flops": m.achieved_flops, "achieved_bandwidth": m.achieved_bandwidth,
            "roofline_fraction": m.roofline_fraction,
        }
        for m, run, commit in session.exec(query).all()
    ]


def benchmarks(session: Session, repository_id: int | None = None) -> list[Benchmark]:
    query = select(Benchmark).order_by(col(Benchmark.suite), col(Benchmark.name))
    if repository_id is not None:
        query = query.where(Benchmark.repository_id == repository_id)
    return list(session.exec(query).all())


def recent_runs(session: Session, repository_id: int | None = None, limit: int = 50) -> list[dict[str, Any]]:
    query = (select(Run, Commit, Repository)
             .join(Commit, col(Run.commit_id) == col(Commit.id))
             .join(Repository, col(Run.repository_id) == col(Repository.id))
             .order_by(col(Run.id).desc()).limit(limit))
    if repository_id is not None:
        query = query.where(Run.repository_id == repository_id)
    return [
        {"id": run.id, "repository": repo.full_name, "sha": commit.sha,
         "title": commit.message.splitlines()[0] if commit.message else "", "state": run.state,
         "trigger": run.trigger, "error": run.error, "created_at": run.created_at,
         "started_at": run.started_at, "finished_at": run.finished_at, "device_id": run.device_id}
        for run, commit, repo in session.exec(query).all()
    ]


def devices(session: Session) -> list[Device]:
    return list(session.exec(select(Device).order_by(col(Device.id))).all())
