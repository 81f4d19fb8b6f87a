"""Dashboard reads that have to stay fast on millions of measurements.

Every function here is a fixed number of queries, however long the history and however many
benchmarks: the overview pages benchmarks, and fetches the last points of a page's benchmarks with
one windowed query (``row_number() over (partition by …)``: SQLite ≥ 3.25 and PostgreSQL),
restricted to recent runs, instead of one query — or one full series — per benchmark.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import ColumnElement, func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from roofwatch.common.vocabulary import HEAD_TRIGGERS, OPEN_STATES, PERFORMANCE_KINDS, ChangeKind
from roofwatch.dashboard.filters import Filters
from roofwatch.service.core.models import Benchmark, Change, Commit, Measurement, Repository, Run, SuiteExecution
from roofwatch.service.core.units import metric_kind
from roofwatch.service.records.changes import members, shown, test_name
from roofwatch.service.records.runs import drawn_runs, on_default_branch

# How many recent runs per wanted point the overview looks at first: room for a few device classes
# (each measured by its own runs) and re-runs of a commit before a series falls back to its history.
RECENT_RUNS_PER_POINT = 4


def _newest_first() -> tuple[ColumnElement[Any], ...]:
    # Branch order (first-parent position), never committer dates: "Rebase and merge" gives many
    # commits one date and rebases send dates backwards. Unplaced commits sort as the oldest on
    # both databases (their NULL ordering differs).
    return (col(Commit.position).is_(None), col(Commit.position).desc(), col(Run.id).desc())


def _oldest_first() -> tuple[ColumnElement[Any], ...]:
    return (col(Commit.position).is_not(None), col(Commit.position).asc(), col(Run.id).asc())


def _trend_columns() -> tuple[Any, ...]:
    """What a sparkline and its latest value need: no commit text to fetch for 3,000 points."""
    return (col(Measurement.benchmark_id).label("benchmark_id"), col(Run.id).label("run_id"),
            col(Run.commit_id).label("commit_id"), col(Commit.position).label("position"),
            col(Measurement.median).label("median"), col(Measurement.roofline_fraction).label("roofline_fraction"))


def _point_columns() -> tuple[Any, ...]:
    return (
        col(Measurement.benchmark_id).label("benchmark_id"), col(Run.id).label("run_id"),
        col(Commit.id).label("commit_id"), col(Commit.sha).label("sha"), col(Commit.message).label("message"),
        col(Commit.author).label("author"), col(Commit.committed_at).label("committed_at"),
        col(Commit.position).label("position"), col(Measurement.median).label("median"), col(Measurement.iqr).label("iqr"), col(Measurement.n).label("n"),
        col(Measurement.roofline_fraction).label("roofline_fraction"),
    )


def _point(row: Any) -> dict[str, Any]:
    point = dict(row._mapping)
    point.pop("rank", None)
    if "message" in point:
        message = point.pop("message") or ""
        point["title"] = message.splitlines()[0] if message else ""
    return point


def _trend_runs(query: Any) -> Any:
    return (query.join(Run, col(Measurement.run_id) == col(Run.id))
            .join(Commit, col(Run.commit_id) == col(Commit.id))
            .where(drawn_runs()))


def benchmark_page(session: Session, filters: Filters, page: int, per_page: int) -> tuple[list[Benchmark], int]:
    """One page of the benchmarks the filters select, and how many they select in all."""
    total = session.exec(filters.apply(select(func.count()).select_from(Benchmark))).one()
    query = filters.apply(select(Benchmark)).order_by(
        col(Benchmark.suite), col(Benchmark.name), col(Benchmark.device_class), col(Benchmark.impl), col(Benchmark.id))
    return list(session.exec(query.offset((page - 1) * per_page).limit(per_page)).all()), int(total)


def recent_points(session: Session, benchmark_ids: Sequence[int], limit: int) -> dict[int, list[dict[str, Any]]]:
    """The last ``limit`` points of each benchmark (oldest first), from one windowed query over measurements.

    Ranking every point of a page's benchmarks reads their whole history (200,000 rows for 100
    benchmarks × 2,000 commits). So the windowed query looks only at the newest
    ``limit × RECENT_RUNS_PER_POINT`` trend runs of their repositories (found by a cheap query over
    runs): a benchmark with ``limit`` points among those has its newest ``limit`` there — any other
    point is older — so the answer is exact. Only benchmarks short of points there (new, or measured
    on few runs) get a second windowed query, over their whole history.
    """
    if not benchmark_ids:
        return {}
    runs = _newest_runs(session, benchmark_ids, limit * RECENT_RUNS_PER_POINT)
    points = _ranked_points(session, benchmark_ids, limit, runs)
    short = [i for i in benchmark_ids if len(points.get(i, ())) < limit]
    if short:
        points.update(_ranked_points(session, short, limit))
    return points


def _newest_runs(session: Session, benchmark_ids: Sequence[int], count: int) -> list[int]:
    """Ids of the newest ``count`` trend runs of each repository these benchmarks belong to.

    Fetched as a list rather than nested as a subquery: the planner then knows it is a few hundred
    runs, and probes the (benchmark, run) index for them instead of scanning whole series.
    """
    repositories = session.execute(sa_select(col(Benchmark.repository_id)).where(
        col(Benchmark.id).in_(benchmark_ids)).distinct()).scalars().all()
    runs: list[int] = []
    for repository in repositories:
        runs += [row.run_id for row in _newest_branch_runs(session, repository, count, drawn_runs())]
    return runs


def _newest_branch_runs(session: Session, repository_id: int, count: int, *where: ColumnElement[bool],
                        columns: Sequence[Any] = ()) -> list[Any]:
    """A repository's ``count`` newest runs in branch order (``_newest_first``), as rows with ``run_id``.

    ``ORDER BY position DESC … LIMIT`` walks the ``commit.position`` index backwards and stops
    after ``count`` runs, where ranking every run with a window function reads all of them (20,000
    a year on). Commits without a position sort as the oldest: they are read only when the placed
    ones run out.
    """
    query = (sa_select(col(Run.id).label("run_id"), *columns).join(Commit, col(Run.commit_id) == col(Commit.id))
             .where(col(Run.repository_id) == repository_id, *where))
    placed = list(session.execute(query.where(col(Commit.position).is_not(None))
                                  .order_by(col(Commit.position).desc(), col(Run.id).desc()).limit(count)))
    if len(placed) < count:
        placed += session.execute(query.where(col(Commit.position).is_(None))
                                  .order_by(col(Run.id).desc()).limit(count - len(placed))).all()
    return placed


def _ranked_points(session: Session, benchmark_ids: Sequence[int], limit: int,
                   runs: list[int] | None = None) -> dict[int, list[dict[str, Any]]]:
    rank = func.row_number().over(partition_by=col(Measurement.benchmark_id), order_by=_newest_first()).label("rank")
    query = _trend_runs(sa_select(*_trend_columns(), rank).select_from(Measurement)).where(
        col(Measurement.benchmark_id).in_(benchmark_ids))
    if runs is not None:
        query = query.where(col(Measurement.run_id).in_(runs))
    ranked = query.subquery()
    points: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in session.execute(
            sa_select(ranked).where(ranked.c.rank <= limit).order_by(ranked.c.benchmark_id, ranked.c.rank.desc())):
        points[row.benchmark_id].append(_point(row))
    return dict(points)


def detected_in_windows(session: Session, windows: dict[int, list[dict[str, Any]]]) -> dict[int, str]:
    """The kind of a confirmed performance change each benchmark has inside its window of points.

    ``windows`` maps a benchmark id to the points its trend compares (from ``recent_points``). A
    change counts when its first bad commit, or the end of its range when not narrowed to one, is
    one of those points; changes triaged ``invalid`` do not. One query for the whole page.
    """
    if not windows:
        return {}
    query = select(Change).where(col(Change.benchmark_id).in_(list(windows)), shown(),
                                 col(Change.kind).in_(PERFORMANCE_KINDS), col(Change.state) != "invalid")
    found: dict[int, str] = {}
    for change in session.exec(query.order_by(col(Change.id))).all():
        points = windows[change.benchmark_id]  # type: ignore[index]
        commits = {p["commit_id"] for p in points}
        positions = {p["position"] for p in points if p["position"] is not None}
        if change.first_bad_commit_id in commits or (
                change.first_bad_commit_id is None and change.range_end_position in positions):
            found[change.benchmark_id] = change.kind  # type: ignore[index]
    return found


def confirmed_between(session: Session, repository_id: int | None,
                      spans: dict[int, tuple[str, str]]) -> dict[int, str]:
    """The kind of a confirmed performance change each benchmark has after one commit, up to another.

    ``spans`` maps a benchmark id to (earlier sha, later sha); a change counts when its first bad
    commit's branch position lies after the earlier commit's and at or before the later one's.
    """
    if not spans:
        return {}
    shas = {sha for pair in spans.values() for sha in pair}
    query = select(Commit.sha, Commit.position).where(col(Commit.sha).in_(shas))
    if repository_id is not None:
        query = query.where(Commit.repository_id == repository_id)
    position = {sha: pos for sha, pos in session.exec(query).all() if pos is not None}
    if not position:
        return {}
    # Only changes between the oldest earlier commit and the newest later one: the span of the
    # comparison, not every change the benchmarks ever had. Columns, not Change rows (with details).
    changes = session.execute(
        sa_select(col(Change.benchmark_id), col(Change.kind), col(Commit.position))
        .join(Commit, col(Change.first_bad_commit_id) == col(Commit.id))
        .where(col(Change.benchmark_id).in_(list(spans)), shown(), col(Change.kind).in_(PERFORMANCE_KINDS),
               col(Change.state) != "invalid",
               col(Commit.position) > min(position.values()), col(Commit.position) <= max(position.values()))
        .order_by(col(Change.id))).all()
    found: dict[int, str] = {}
    for benchmark_id, kind, at in changes:
        before, after = (position.get(sha) for sha in spans[benchmark_id])
        if at is not None and before is not None and after is not None and before < at <= after:
            found[benchmark_id] = kind
    return found


def full_series(session: Session, benchmark_ids: Iterable[int]) -> dict[int, list[dict[str, Any]]]:
    """Every point of these benchmarks (oldest first), in one query."""
    ids = list(benchmark_ids)
    if not ids:
        return {}
    query = _trend_runs(sa_select(*_point_columns()).select_from(Measurement)).where(
        col(Measurement.benchmark_id).in_(ids)).order_by(*_oldest_first())
    points: dict[int, list[dict[str, Any]]] = {i: [] for i in ids}
    for row in session.execute(query):
        points[row.benchmark_id].append(_point(row))
    return points


def siblings(session: Session, benchmark: Benchmark) -> list[Benchmark]:
    """The same series on every device class (this one included)."""
    query = select(Benchmark).where(
        Benchmark.repository_id == benchmark.repository_id, Benchmark.suite == benchmark.suite,
        Benchmark.name == benchmark.name, Benchmark.params == benchmark.params, Benchmark.dtype == benchmark.dtype,
        Benchmark.impl == benchmark.impl).order_by(col(Benchmark.device_class), col(Benchmark.id))
    return list(session.exec(query).all())


def test_function(name: str) -> str:
    """``test_softmax[torch-4096]`` → ``test_softmax``: what a kernel and its baselines share."""
    return name.split("[", 1)[0]


def alternatives(session: Session, benchmark: Benchmark) -> list[Benchmark]:
    """Other implementations of the same test on the same device class, dtype and shape."""
    function = test_function(benchmark.name)
    query = select(Benchmark).where(
        Benchmark.repository_id == benchmark.repository_id, Benchmark.suite == benchmark.suite,
        Benchmark.dtype == benchmark.dtype, Benchmark.shape == benchmark.shape,
        Benchmark.device_class == benchmark.device_class, Benchmark.impl != benchmark.impl,
        (col(Benchmark.name) == function) | col(Benchmark.name).startswith(function + "[", autoescape=True),
    ).order_by(col(Benchmark.impl), col(Benchmark.name))
    return list(session.exec(query).all())


def series_changes(session: Session, benchmark_ids: Iterable[int]) -> list[dict[str, Any]]:
    """Confirmed changes of these benchmarks, with their first bad commit when known (candidates and
    rejected sightings stay internal, as everywhere else on the dashboard)."""
    query = (sa_select(Change, col(Benchmark.device_class), col(Commit.sha), *METRIC_COLUMNS)
             .join(Benchmark, col(Change.benchmark_id) == col(Benchmark.id))
             .outerjoin(Commit, col(Change.first_bad_commit_id) == col(Commit.id))
             .where(col(Change.benchmark_id).in_(list(benchmark_ids)), shown()).order_by(col(Change.id)))
    return [_change_row(change, device_class, sha, metric_of(*work))
            for change, device_class, sha, *work in session.execute(query)]


# What decides the metric a change is said in (``units.metric_kind``); outer-joined, so None for a test.
METRIC_COLUMNS = (col(Benchmark.unit), col(Benchmark.flops), col(Benchmark.bytes))


def metric_of(unit: str | None, flops: float | None, bytes_moved: float | None) -> str | None:
    """The kind of metric the benchmark's chart plots; None for a correctness change (no benchmark)."""
    return None if unit is None else metric_kind(unit, flops, bytes_moved)


def _change_row(change: Change, device_class: str | None, sha: str | None, kind: str | None) -> dict[str, Any]:
    return {
        "id": change.id, "benchmark_id": change.benchmark_id, "kind": change.kind, "state": change.state,
        "commit_id": change.first_bad_commit_id, "commit": sha,
        "range": None if sha else f"{change.range_start_sha or ''}..{change.range_end_sha or ''}",
        "change_pct": change.change_pct, "ci_low": change.ci_low, "ci_high": change.ci_high,
        "device_class": device_class, "test_id": change.test_id, "suite": change.suite, "metric_kind": kind,
        "tests": members(change) if change.kind == ChangeKind.CORRECTNESS_FAILURE else [],
    }


def _open_changes_query(filters: Filters) -> Any:
    query = (sa_select(Change, col(Repository.full_name), col(Benchmark.name), col(Benchmark.device_class),
                        col(Commit.sha), *METRIC_COLUMNS)
             .join(Repository, col(Change.repository_id) == col(Repository.id))
             .outerjoin(Benchmark, col(Change.benchmark_id) == col(Benchmark.id))
             .outerjoin(Commit, col(Change.first_bad_commit_id) == col(Commit.id))
             .where(col(Change.state).in_(OPEN_STATES), shown()))
    if filters.repo:
        # By the change's repository: a correctness change has no benchmark to filter on.
        query = query.where(col(Repository.full_name) == filters.repo)
    narrowing = replace(filters, repo="")
    if narrowing.active:
        query = query.where(col(Change.benchmark_id).in_(narrowing.apply(select(Benchmark.id))))
    return query


def open_changes(session: Session, filters: Filters, limit: int) -> tuple[list[dict[str, Any]], int]:
    """The newest open changes the filters select (at most ``limit``), and how many there are."""
    query = _open_changes_query(filters)
    total = session.execute(sa_select(func.count()).select_from(query.subquery())).scalar_one()
    rows = []
    for change, repository, name, device_class, sha, *work in session.execute(
            query.order_by(col(Change.id).desc()).limit(limit)):
        row = _change_row(change, device_class, sha, metric_of(*work))
        row.update(repository=repository, benchmark=name or test_name(change.test_id, change.details))
        rows.append(row)
    return rows, int(total)


def repository_heads(session: Session, filters: Filters) -> list[dict[str, Any]]:
    """Each repository with its newest measured default-branch commit, that run's state and open changes."""
    repositories = select(Repository).order_by(col(Repository.full_name))
    if filters.repo:
        repositories = repositories.where(Repository.full_name == filters.repo)
    heads = {row["repository_id"]: row for row in _head_runs(session)}
    open_by_repo = _counts(session, col(Change.repository_id), col(Change.state).in_(OPEN_STATES), shown())
    head_commits = [h["commit_id"] for h in heads.values()]
    open_by_commit = _counts(session, col(Change.first_bad_commit_id), col(Change.state).in_(OPEN_STATES), shown(),
                             col(Change.first_bad_commit_id).in_(head_commits))
    rows = []
    for repository in session.exec(repositories).all():
        head = heads.get(repository.id)
        rows.append({
            "repository": repository, "head": head, "open_changes": open_by_repo.get(repository.id, 0),
            "open_at_head": open_by_commit.get(head["commit_id"], 0) if head else 0,
        })
    return rows


def _counts(session: Session, key: Any, *where: ColumnElement[bool]) -> dict[Any, int]:
    """``count(*)`` of changes grouped by ``key``."""
    rows = session.execute(sa_select(key, func.count()).where(*where).group_by(key)).all()
    return {row[0]: int(row[1]) for row in rows}


def _head_runs(session: Session) -> list[dict[str, Any]]:
    """Per repository, the newest run on its newest commit among default-branch runs."""
    columns: tuple[Any, ...] = (col(Run.repository_id).label("repository_id"), col(Run.state).label("state"),
               col(Run.trigger).label("trigger"), col(Run.analysis_state).label("analysis_state"),
               col(Run.analysis_error).label("analysis_error"), col(Commit.id).label("commit_id"),
               col(Commit.sha).label("sha"),
               col(Commit.message).label("message"), col(Commit.author).label("author"),
               col(Commit.committed_at).label("committed_at"))
    heads = []
    for repository in session.execute(sa_select(col(Repository.id))).scalars():
        heads += [_point(row) for row in _newest_branch_runs(
            session, repository, 1, col(Run.trigger).in_(HEAD_TRIGGERS), on_default_branch(), columns=columns)]
    return heads


def repository_id(session: Session, full_name: str) -> int | None:
    return session.exec(select(Repository.id).where(Repository.full_name == full_name)).first()


def latest_environment(session: Session, benchmark: Benchmark) -> dict[str, Any]:
    """The commit's own environment the newest measurement of ``benchmark`` ran in ({} when its suite
    ran on the worker's interpreter)."""
    row = session.exec(select(SuiteExecution.environment).join(Measurement, col(Measurement.run_id) == col(SuiteExecution.run_id))
                       .where(Measurement.benchmark_id == benchmark.id, SuiteExecution.name == benchmark.suite)
                       .order_by(col(Measurement.id).desc()).limit(1)).first()
    return dict(row or {})
