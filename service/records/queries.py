"""Read-only queries shared by the API, the CLI and the dashboard."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select as sa_select
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from roofwatch.common.vocabulary import CORRECTNESS_KINDS
from roofwatch.service.analysis.suite_files import FilesPoint, events
from roofwatch.service.core.models import Benchmark, Change, Commit, Comparison, Device, Measurement, Repository, Run
from roofwatch.service.core.units import METRIC_NAMES, change_in_metric, interval_in_metric, metric_kind
from roofwatch.service.records.changes import shown, test_name
from roofwatch.service.records.runs import drawn_runs
from roofwatch.service.records.series import suite_files_by_run


def _title(message: str | None) -> str:
    return message.splitlines()[0] if message else ""


# These read columns, never ORM entities: building a SQLModel object costs ~25 µs (pydantic
# private-attribute setup), so a 2,000-point series loaded as (Measurement, Run, Commit) spent
# ~100 ms constructing 6,000 objects, and Measurement.samples (a JSON list) was parsed unread.


def change_rows(session: Session, repository_id: int | None = None, *, after: int = 0,
                limit: int | None = None, change_id: int | None = None) -> list[dict[str, Any]]:
    """Changes in the ``regressions --format json`` contract (DESIGN §4), oldest first.

    One query: the benchmark and first bad commit come from outer joins, not a ``session.get``
    per change (two round trips each, ~900 on a repository with 450 changes). ``after`` and
    ``limit`` read one page by id (the primary key's index, however many changes there are);
    ``change_id`` reads one change.
    """
    query = (
        sa_select(col(Change.id), col(Repository.full_name), col(Benchmark.name), col(Benchmark.device_class),
                  col(Commit.sha), col(Change.test_id), col(Change.suite), col(Change.kind),
                  col(Change.range_start_sha), col(Change.range_end_sha), col(Change.change_pct),
                  col(Change.ci_low), col(Change.ci_high), col(Change.p_value), col(Change.state),
                  col(Change.details), col(Benchmark.unit), col(Benchmark.flops), col(Benchmark.bytes))
        .join(Repository, col(Change.repository_id) == col(Repository.id))
        .outerjoin(Benchmark, col(Change.benchmark_id) == col(Benchmark.id))
        .outerjoin(Commit, col(Change.first_bad_commit_id) == col(Commit.id))
        .where(shown())
        .order_by(col(Change.id))
    )
    if repository_id is not None:
        query = query.where(col(Change.repository_id) == repository_id)
    if change_id is not None:
        query = query.where(col(Change.id) == change_id)
    if after:
        query = query.where(col(Change.id) > after)
    if limit is not None:
        query = query.limit(limit)
    return [
        {
            "id": row.id,
            "repository": row.full_name,
            "benchmark": row.name if row.name is not None else test_name(row.test_id, row.details),
            # A correctness change's failing tests: its function's parametrizations that one commit broke.
            "tests": _tests(row.kind, row.test_id, row.details),
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
            # What the commit's own environment changed under it, where it has one: "slowdep 1.0 → 2.0".
            "environment_change": (row.details or {}).get("environment_change", []),
            # Why it moved, in one line, from the A/B that confirmed it (analysis.attribution): the kernels,
            # environment or imported files that differ between its two commits. "": not recorded.
            "why": (row.details or {}).get("why", ""),
            **_in_metric(row),
        }
        for row in session.execute(query)
    ]


def _tests(kind: str, test_id: str | None, details: dict[str, Any] | None) -> list[str]:
    """A correctness change's failing tests (its function's parametrizations that one commit broke); [] else."""
    if kind not in CORRECTNESS_KINDS:
        return []
    return list((details or {}).get("tests") or ([test_id] if test_id else []))


def _in_metric(row: Any) -> dict[str, Any]:
    """The change said in the metric the dashboard plots its benchmark in (``metric``: throughput,
    bandwidth, time or value), so a regression of a bandwidth line reads as the line moves: down."""
    if row.unit is None:  # a correctness change: no benchmark, no metric
        return {"metric": None, "metric_change_pct": None, "metric_ci": None}
    kind = metric_kind(row.unit, row.flops, row.bytes)
    bounds = interval_in_metric(row.ci_low, row.ci_high, kind)
    return {"metric": METRIC_NAMES[kind], "metric_change_pct": change_in_metric(row.change_pct, kind),
            "metric_ci": list(bounds) if bounds is not None else None}


SERIES_PAGE = 1_000  # points per page of the series API unless asked otherwise
# Runs looked at per wanted point before a page falls back to reading the series below its cursor:
# room for re-runs and for a benchmark measured on every other run (two device classes).
RUNS_PER_POINT = 2


def _series_columns() -> tuple[Any, ...]:
    return (col(Run.id).label("run_id"), col(Commit.position).label("position"), col(Commit.sha),
            col(Commit.message), col(Commit.author), col(Commit.committed_at), col(Measurement.median),
            col(Measurement.iqr), col(Measurement.min), col(Measurement.n), col(Measurement.cv),
            col(Measurement.achieved_flops), col(Measurement.achieved_bandwidth), col(Measurement.roofline_fraction))


def _series_query(benchmark_id: int) -> Any:
    # Every column read from ``measurement`` is in ``ix_measurement_benchmark_run``, so PostgreSQL
    # answers from the index alone (a series' rows lie one run's worth of rows apart in the heap).
    # The branch's series only, as its chart draws it: a pull request's head, or a commit
    # measured off the default branch (``Run.branch``), is no point of it.
    return (sa_select(*_series_columns()).select_from(Measurement)
            .join(Run, col(Measurement.run_id) == col(Run.id))
            .join(Commit, col(Run.commit_id) == col(Commit.id))
            .where(col(Measurement.benchmark_id) == benchmark_id, drawn_runs()))


def _series_point(p: Any) -> dict[str, Any]:
    return {
        "run_id": p.run_id, "position": p.position, "sha": p.sha, "title": _title(p.message), "author": p.author,
        "committed_at": p.committed_at, "median": p.median, "iqr": p.iqr, "min": p.min, "n": p.n, "cv": p.cv,
        "achieved_flops": p.achieved_flops, "achieved_bandwidth": p.achieved_bandwidth,
        "roofline_fraction": p.roofline_fraction,
    }


def series(session: Session, benchmark_id: int) -> list[dict[str, Any]]:
    """Every measurement of one benchmark on the branch in branch order (first-parent position), oldest first.

    The whole history (the CSV export); the API pages it with :func:`series_page`.
    """
    query = _series_query(benchmark_id).order_by(col(Commit.position).is_not(None), col(Commit.position),
                                                 col(Run.id))
    return [_series_point(p) for p in session.execute(query)]


@dataclass(frozen=True)
class SeriesPage:
    """Points of one page, oldest first, and the cursor to the page before it (``None``: no more).

    ``events``: where the suite's files from outside the commit changed among those points
    (``roofwatch.service.analysis.suite_files``), the page's first point compared with the one before it.
    """

    points: list[dict[str, Any]]
    next_before: int | None
    events: list[dict[str, Any]] = field(default_factory=list)


def series_events(session: Session, benchmark: Benchmark, points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The benchmark-files events among ``points`` (one page of the series, oldest first).

    The page's first point is compared with the measurement just before it on the branch, so an
    event on a page's edge is listed once, on the page that holds its point.
    """
    if not points:
        return []
    assert benchmark.id is not None
    first = points[0]["position"]
    previous = None if first is None else session.execute(
        sa_select(col(Run.id)).select_from(Measurement).join(Run, col(Measurement.run_id) == col(Run.id))
        .join(Commit, col(Run.commit_id) == col(Commit.id))
        .where(col(Measurement.benchmark_id) == benchmark.id, drawn_runs(),
               (col(Commit.position) < first) | col(Commit.position).is_(None))
        .order_by(col(Commit.position).is_(None), col(Commit.position).desc(), col(Run.id).desc())
        .limit(1)).scalar_one_or_none()
    runs = [p["run_id"] for p in points] + ([previous] if previous is not None else [])
    files = suite_files_by_run(session, runs, benchmark.suite)
    found = events([FilesPoint(p["position"], p["sha"], p["run_id"], files.get(p["run_id"], {})) for p in points],
                   before=files.get(previous, {}) if previous is not None else None)
    return [event.as_dict() for event in found]


def series_page(session: Session, benchmark: Benchmark, before: int | None = None,
                limit: int = SERIES_PAGE) -> SeriesPage:
    """The newest ``limit`` measurements below branch position ``before`` (all when ``None``).

    A page never splits a commit: its measurements (re-runs, several GPUs) are on one page, so
    ``next_before`` — the oldest position on this page — is an exact cursor. Measurements of
    commits without a position sort as the oldest and come on the last page.

    Reads what the page holds: the repository's newest runs below the cursor (the
    ``commit.position`` index), then the (benchmark_id, run_id) index over those runs' id range.
    A sparse series (measured by few of the repository's runs) reads the rest of its history
    instead: it is short.
    """
    assert benchmark.id is not None
    below = [col(Commit.position) < before] if before is not None else []
    wanted = (limit + 1) * RUNS_PER_POINT
    runs = session.execute(
        sa_select(col(Run.id), col(Commit.position)).join(Commit, col(Run.commit_id) == col(Commit.id))
        .where(col(Commit.repository_id) == benchmark.repository_id, col(Commit.position).is_not(None), drawn_runs(),
               *below)
        .order_by(col(Commit.position).desc()).limit(wanted)).all()
    newest_first = (col(Commit.position).is_(None), col(Commit.position).desc(), col(Run.id).desc())
    rows: list[Any] = []
    if len(runs) == wanted:  # older runs exist: read the id range of these, above the last one's commit
        floor = runs[-1].position
        ids = [r.id for r in runs]
        rows = list(session.execute(
            _series_query(benchmark.id).where(col(Measurement.run_id).between(min(ids), max(ids)),
                                              col(Commit.position) > floor, *below)
            .order_by(*newest_first).limit(limit + 1)))
    if len(rows) <= limit:  # not enough there: the rest of the series below the cursor, nulls last
        rest = _series_query(benchmark.id)
        if before is not None:
            rest = rest.where((col(Commit.position) < before) | col(Commit.position).is_(None))
        rows = list(session.execute(rest.order_by(*newest_first).limit(limit + 1)))
    if len(rows) <= limit:
        points = [_series_point(r) for r in reversed(rows)]
        return SeriesPage(points, None, series_events(session, benchmark, points))
    cut = rows[limit].position
    page = [r for r in rows[:limit] if r.position != cut]  # an unplaced cut (None) keeps the placed rows
    if not page:
        # One commit (or the unplaced ones) holds more than a page: that commit, whole, is the page.
        at = col(Commit.position) == cut if cut is not None else col(Commit.position).is_(None)
        page = list(session.execute(_series_query(benchmark.id).where(at).order_by(*newest_first)))
        oldest = cut
    else:
        oldest = page[-1].position
    points = [_series_point(r) for r in reversed(page)]
    return SeriesPage(points, oldest, series_events(session, benchmark, points))


def benchmarks(session: Session, repository_id: int | None = None) -> list[Benchmark]:
    query = select(Benchmark).order_by(col(Benchmark.suite), col(Benchmark.name))
    if repository_id is not None:
        query = query.where(Benchmark.repository_id == repository_id)
    return list(session.exec(query).all())


def recent_runs(session: Session, repository_id: int | None = None, limit: int = 50) -> list[dict[str, Any]]:
    query = (sa_select(col(Run.id), col(Repository.full_name), col(Commit.sha), col(Commit.message), col(Run.state),
                       col(Run.trigger), col(Run.branch), col(Run.error), col(Run.created_at), col(Run.started_at),
                       col(Run.finished_at), col(Run.device_id))
             .join(Commit, col(Run.commit_id) == col(Commit.id))
             .join(Repository, col(Run.repository_id) == col(Repository.id))
             .order_by(col(Run.id).desc()).limit(limit))
    if repository_id is not None:
        query = query.where(col(Run.repository_id) == repository_id)
    return [
        {"id": run.id, "repository": run.full_name, "sha": run.sha, "title": _title(run.message), "state": run.state,
         "trigger": run.trigger, "branch": run.branch, "error": run.error, "created_at": run.created_at,
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
