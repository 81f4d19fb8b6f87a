"""A window of branch history for the benchmark chart: reads that cost what the window holds.

A benchmark page shows the last ``DEFAULT_COMMITS`` commits by default (``?from=`` and ``?to=``,
branch positions, widen or move it; ``?from=0`` is the whole history). What it reads:

1. the window's bounds: the newest position of the series (``latestmeasurement``) and the oldest
   (the first entry of each series in the (benchmark_id, run_id) index);
2. the ids of the branch runs on commits inside the window — a repository's runs are numbered
   as they are made, so the run ids of a window of commits are one short stretch of the index,
   whatever lies before or after it;
3. the points, light columns only, from an index range scan over (benchmark_id, run_id) across
   that stretch, filtered to the window's positions (a re-run of an old commit has a new id);
4. once it is known what the chart draws (``roofwatch.dashboard.downsampling``), the commit
   message and author of those points only.

Commits without a branch position (data from before positions were recorded) sort as the oldest,
so they belong to any window that reaches back to the start of history.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from roofwatch.service.core.models import Commit, LatestMeasurement, Measurement, Run
from roofwatch.service.records.runs import drawn_runs

DEFAULT_COMMITS = 1_000
# Beyond this many run ids a window is read as one index range (SQLite caps bound parameters).
MAX_PROBED_RUNS = 10_000


@dataclass(frozen=True)
class Window:
    """Branch positions ``first``..``last`` (inclusive) of the series' ``oldest``..``newest``."""

    first: int
    last: int
    oldest: int
    newest: int

    @property
    def from_start(self) -> bool:
        """Whether the window reaches the oldest point (and so takes in unplaced commits too)."""
        return self.first <= self.oldest

    @property
    def to_end(self) -> bool:
        return self.last >= self.newest

    @property
    def commits(self) -> int:
        return self.last - self.first + 1


def bounds(session: Session, repository_id: int, benchmark_ids: Sequence[int]) -> tuple[int, int] | None:
    """(oldest, newest) branch position measured by any of these series; ``None`` when none is placed."""
    newest = session.execute(
        sa_select(func.max(col(Commit.position)))
        .select_from(LatestMeasurement)
        .join(Run, col(Run.id) == col(LatestMeasurement.run_id))
        .join(Commit, col(Commit.id) == col(Run.commit_id))
        .where(col(LatestMeasurement.benchmark_id).in_(benchmark_ids))).scalar_one_or_none()
    if newest is None:  # only pull-request or bisection runs, or rows written around ingest
        newest = _newest_branch_position(session, repository_id)
    oldest = [_first_position(session, benchmark_id) for benchmark_id in benchmark_ids]
    placed = [p for p in oldest if p is not None]
    if newest is None or not placed:
        return None
    return min(placed), max(newest, min(placed))


def _newest_branch_position(session: Session, repository_id: int) -> int | None:
    return session.execute(
        sa_select(col(Commit.position)).join(Run, col(Run.commit_id) == col(Commit.id))
        .where(col(Commit.repository_id) == repository_id, col(Commit.position).is_not(None), drawn_runs())
        .order_by(col(Commit.position).desc()).limit(1)).scalar_one_or_none()


def _first_position(session: Session, benchmark_id: int) -> int | None:
    """The position of a series' first branch run: the front of its (benchmark_id, run_id) index range."""
    return session.execute(
        sa_select(col(Commit.position)).select_from(Measurement)
        .join(Run, col(Run.id) == col(Measurement.run_id))
        .join(Commit, col(Commit.id) == col(Run.commit_id))
        .where(col(Measurement.benchmark_id) == benchmark_id, drawn_runs(),
               col(Commit.position).is_not(None))
        .order_by(col(Measurement.run_id)).limit(1)).scalar_one_or_none()


def choose(oldest: int, newest: int, first: int | None, last: int | None, commits: int | None = None) -> Window:
    """The window asked for, clamped to what exists; by default the newest ``commits`` commits."""
    end = newest if last is None else max(oldest, min(last, newest))
    start = end - (commits or DEFAULT_COMMITS) + 1 if first is None else first
    return Window(max(oldest, min(start, end)), end, oldest, newest)


def _in_window(window: Window) -> Any:
    placed = col(Commit.position) <= window.last
    if window.from_start:  # older than the first point (a bisected commit) or unplaced: still "from the start"
        return placed | col(Commit.position).is_(None)
    return placed & (col(Commit.position) >= window.first)


def _window_runs(session: Session, repository_id: int, window: Window) -> dict[int, dict[str, Any]]:
    """The branch runs on commits inside the window: run id → its commit's id, position and sha."""
    rows = session.execute(
        sa_select(col(Run.id).label("run_id"), col(Commit.id).label("commit_id"),
                  col(Commit.position).label("position"), col(Commit.sha).label("sha"))
        .join(Commit, col(Run.commit_id) == col(Commit.id))
        .where(col(Commit.repository_id) == repository_id, drawn_runs(), _in_window(window)))
    return {row.run_id: dict(row._mapping) for row in rows}


def points(session: Session, repository_id: int, benchmark_ids: Sequence[int],
           window: Window) -> dict[int, list[dict[str, Any]]]:
    """Each series' points inside the window, oldest first: run, commit id, position and sha, median, roofline.

    No commit message or author: those are fetched (:func:`with_commits`) for the points the chart draws.
    The measurements are read from the index alone (no join): which run belongs to the window, and
    at which commit, is already known from the window's runs.
    """
    series: dict[int, list[dict[str, Any]]] = {i: [] for i in benchmark_ids}
    runs = _window_runs(session, repository_id, window)
    if not runs or not benchmark_ids:
        return series
    low, high = min(runs), max(runs)
    # Runs made in order give one dense stretch of ids: read it as an index range. A window whose
    # stretch is mostly other runs (a bisection of its commits long after) probes its ids instead.
    dense = high - low + 1 <= 2 * len(runs) or len(runs) > MAX_PROBED_RUNS
    in_runs = col(Measurement.run_id).between(low, high) if dense else col(Measurement.run_id).in_(list(runs))
    query = (sa_select(col(Measurement.benchmark_id), col(Measurement.run_id), col(Measurement.median),
                       col(Measurement.iqr), col(Measurement.n), col(Measurement.roofline_fraction))
             .where(col(Measurement.benchmark_id).in_(benchmark_ids), in_runs))
    for row in session.execute(query):
        run = runs.get(row.run_id)
        if run is not None:  # a run in the id range but on a commit outside the window is skipped
            series[row.benchmark_id].append({**run, "median": row.median, "iqr": row.iqr, "n": row.n,
                                             "roofline_fraction": row.roofline_fraction})
    for points_of in series.values():  # branch order, unplaced commits first (as the oldest)
        points_of.sort(key=lambda p: (p["position"] is not None, p["position"] or 0, p["run_id"]))
    return series


def with_commits(session: Session, points: Iterable[dict[str, Any]]) -> None:
    """Add ``title``, ``author`` and ``committed_at`` to each point, in one query."""
    chosen = list(points)
    ids = {p["commit_id"] for p in chosen}
    if not ids:
        return
    rows = session.execute(sa_select(col(Commit.id), col(Commit.message), col(Commit.author),
                                     col(Commit.committed_at)).where(col(Commit.id).in_(ids)))
    text = {row.id: row for row in rows}
    for point in chosen:
        commit = text[point["commit_id"]]
        message = commit.message or ""
        point.update(title=message.splitlines()[0] if message else "", author=commit.author,
                     committed_at=commit.committed_at)
