"""JSON API: runs, benchmarks, series, changes, comparisons, devices; triage with a token."""

from __future__ import annotations

import csv
import io
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Path, Query, Response
from pydantic import BaseModel, Field
from sqlmodel import select

from roofwatch.common.vocabulary import TriageState
from roofwatch.service.api.deps import TokenDep
from roofwatch.service.api.public import (
    BenchmarkPublic,
    ComparisonDetail,
    DevicePublic,
    RepositoryPublic,
    RunDetail,
    SeriesPage,
)
from roofwatch.service.core.errors import UnknownRepository
from roofwatch.service.core.models import (
    ROW_ID_MAX,
    Benchmark,
    Change,
    Commit,
    Comparison,
    Device,
    Measurement,
    Repository,
    Run,
    SuiteExecution,
    TestOutcome,
)
from roofwatch.service.core.requests import SessionDep
from roofwatch.service.records import queries
from roofwatch.service.records.changes import CONFIRMED
from roofwatch.service.records.repositories import find_repository

router = APIRouter(prefix="/api", tags=["api"])

RowId = Annotated[int, Path(ge=0, le=ROW_ID_MAX)]
RepoQuery = Annotated[str | None, Query(
    description="OWNER/NAME, clone URL or the local path `roofwatch run --repo` was given; unknown: 404")]

SERIES_PAGE_MAX = 10_000
SERIES_CSV_COLUMNS = ("position", "sha", "run_id", "committed_at", "median", "iqr", "min", "n", "cv",
                      "achieved_flops", "achieved_bandwidth", "roofline_fraction", "author", "title")

# Documented so clients (and the property tests run against /openapi.json) know what to expect.
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "unknown repository or id"}}
WRITE: dict[int | str, dict[str, Any]] = {
    **NOT_FOUND,
    400: {"description": "a body that cannot be parsed"},
    401: {"description": "missing or wrong bearer token"},
    403: {"description": "write actions are disabled: ROOFWATCH_API_TOKEN is not set"},
}


def _repository_id(session: SessionDep, repo: str | None) -> int | None:
    """``?repo=`` names a repository the way ``roofwatch run`` does: ``OWNER/NAME``, clone URL or path."""
    if repo is None:
        return None
    try:
        return find_repository(session, repo).id
    except UnknownRepository as exc:
        raise HTTPException(404, str(exc)) from exc


@router.get("/repositories", response_model=list[RepositoryPublic])
def list_repositories(session: SessionDep) -> Any:
    # Unauthenticated: a clone URL may carry a token (https://x-access-token:...@); RepositoryPublic redacts it.
    return session.exec(select(Repository)).all()


@router.get("/runs", responses=NOT_FOUND)
def list_runs(session: SessionDep, repo: RepoQuery = None,
              limit: int = Query(50, ge=1, le=1000)) -> list[dict[str, Any]]:
    return queries.recent_runs(session, _repository_id(session, repo), limit)


@router.get("/runs/{run_id}", responses=NOT_FOUND, response_model=RunDetail)
def get_run(run_id: RowId, session: SessionDep) -> Any:
    run = session.get(Run, run_id)
    if run is None:
        raise HTTPException(404, f"no run {run_id}")
    commit = session.get(Commit, run.commit_id)
    return {
        "run": run,
        "commit": commit,
        "device": session.get(Device, run.device_id) if run.device_id else None,
        "suites": session.exec(select(SuiteExecution).where(SuiteExecution.run_id == run_id)).all(),
        "outcomes": session.exec(select(TestOutcome).where(TestOutcome.run_id == run_id)).all(),
        "measurements": [
            {"benchmark": b.name, "benchmark_id": b.id, "median": m.median, "iqr": m.iqr, "n": m.n,
             "cv": m.cv, "achieved_flops": m.achieved_flops, "achieved_bandwidth": m.achieved_bandwidth,
             "roofline_fraction": m.roofline_fraction, "ran": m.ran}
            for m, b in session.exec(
                select(Measurement, Benchmark).join(Benchmark).where(Measurement.run_id == run_id)).all()
        ],
    }


@router.get("/benchmarks", responses=NOT_FOUND, response_model=list[BenchmarkPublic])
def list_benchmarks(session: SessionDep, repo: RepoQuery = None) -> Any:
    return queries.benchmarks(session, _repository_id(session, repo))


@router.get("/benchmarks/{benchmark_id}/series", responses=NOT_FOUND, response_model=SeriesPage)
def get_series(benchmark_id: RowId, session: SessionDep,
               before: Annotated[int | None, Query(ge=0, le=2**31 - 1, description=(
                   "branch position: only older measurements (the previous page's `next_before`)"))] = None,
               limit: Annotated[int, Query(ge=1, le=SERIES_PAGE_MAX)] = queries.SERIES_PAGE) -> Any:
    """A benchmark's measurements, newest page first, each page oldest first; `next` pages back in history.

    A page never splits a commit. The whole history in one response: `/series.csv`.
    """
    benchmark = _benchmark(session, benchmark_id)
    page = queries.series_page(session, benchmark, before, limit)
    following = None if page.next_before is None else \
        f"/api/benchmarks/{benchmark_id}/series?{urlencode({'before': page.next_before, 'limit': limit})}"
    return {"benchmark": benchmark, "points": page.points, "next_before": page.next_before, "next": following,
            "events": page.events}


@router.get("/benchmarks/{benchmark_id}/series.csv", responses=NOT_FOUND, response_class=Response)
def export_series(benchmark_id: RowId, session: SessionDep) -> Response:
    """Every measurement of a benchmark, oldest first, as CSV: the export of its whole history."""
    _benchmark(session, benchmark_id)  # 404 for an unknown id, not an empty file
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(SERIES_CSV_COLUMNS)
    for point in queries.series(session, benchmark_id):
        point["title"] = point["title"].replace("\r", " ").replace("\n", " ")
        writer.writerow(["" if point[c] is None else point[c] for c in SERIES_CSV_COLUMNS])
    name = f"benchmark-{benchmark_id}.csv"
    return Response(out.getvalue(), media_type="text/csv",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})


def _benchmark(session: SessionDep, benchmark_id: int) -> Benchmark:
    benchmark = session.get(Benchmark, benchmark_id)
    if benchmark is None:
        raise HTTPException(404, f"no benchmark {benchmark_id}")
    return benchmark


CHANGES_PAGE = 1000


@router.get("/changes", responses=NOT_FOUND)
def list_changes(response: Response, session: SessionDep, repo: RepoQuery = None,
                 after: Annotated[int, Query(ge=0, le=ROW_ID_MAX, description="list changes with a larger id")] = 0,
                 limit: Annotated[int, Query(ge=1, le=10_000)] = CHANGES_PAGE) -> list[dict[str, Any]]:
    """Confirmed changes, oldest first, a page at a time: a full page carries a ``Link: <…>; rel="next"``
    header (as GitHub's API does) whose URL lists the changes after it."""
    rows = queries.change_rows(session, _repository_id(session, repo), after=after, limit=limit)
    if len(rows) == limit:
        kept = {"repo": repo} if repo else {}
        response.headers["Link"] = f'</api/changes?{urlencode({**kept, "after": rows[-1]["id"], "limit": limit})}>; rel="next"'
    return rows


class TriageRequest(BaseModel):
    state: TriageState
    note: str = Field(default="", max_length=2000)


@router.patch("/changes/{change_id}", responses=WRITE)
def triage_change(change_id: RowId, body: TriageRequest, session: SessionDep, actor: TokenDep) -> dict[str, Any]:
    """Set a change's triage state (needs the API token)."""
    from roofwatch.service.records.triage import TriageError, set_state

    change = session.get(Change, change_id)
    # Only what `GET /api/changes` lists is triaged: a candidate not yet confirmed is no change yet.
    if change is None or change.phase != CONFIRMED:
        raise HTTPException(404, f"no change {change_id}")
    try:
        set_state(session, change_id, body.state, body.note, actor)
    except TriageError as exc:
        raise HTTPException(422, str(exc)) from exc
    session.commit()
    return queries.change_rows(session, change_id=change_id)[0]


@router.get("/comparisons/{comparison_id}", responses=NOT_FOUND, response_model=ComparisonDetail)
def get_comparison(comparison_id: RowId, session: SessionDep) -> Any:
    """An A/B comparison: verdict and per-benchmark results with their per-round values."""
    from roofwatch.service.records.comparisons import results_of

    comparison = session.get(Comparison, comparison_id)
    if comparison is None:
        raise HTTPException(404, f"no comparison {comparison_id}")
    return {
        "comparison": comparison,
        "base": session.get(Commit, comparison.base_commit_id),
        "head": session.get(Commit, comparison.head_commit_id),
        "results": [{"benchmark": b.name, "suite": b.suite, "benchmark_id": b.id, **r.model_dump()}
                    for r, b in results_of(session, comparison_id)],
    }


class AcceptMissingRequest(BaseModel):
    benchmarks: list[Annotated[str, Field(min_length=1, max_length=500)]] | None = Field(
        default=None, max_length=100, description="names (or suite::name) to accept; omitted: every missing one")
    by: str = Field(default="", max_length=200, description="who accepts, recorded beside the token's name")


@router.post("/comparisons/{comparison_id}/accept-missing", response_model=ComparisonDetail,
             responses={**WRITE, 413: {"description": "a body over 64 KiB"}, 422: {"description": "a name that is not missing"}})
def accept_missing(comparison_id: RowId, body: AcceptMissingRequest, session: SessionDep, actor: TokenDep) -> Any:
    """Accept benchmarks of the base that are missing on the comparison's head (needs the API token).

    Recorded with who and when; on a pull request it holds for its later heads too, and the
    pull request's status and comment are published again.
    """
    from roofwatch.service.flows.pull_request import finish
    from roofwatch.service.records import acceptances

    comparison = session.get(Comparison, comparison_id)
    if comparison is None or comparison.finished_at is None:
        raise HTTPException(404, f"no finished comparison {comparison_id}")
    who = f"{body.by.strip()} ({actor})" if body.by.strip() else actor
    try:
        acceptances.accept(session, comparison, who, "api", body.benchmarks)
    except LookupError as exc:
        raise HTTPException(422, str(exc)) from exc
    on_pull_request = acceptances.pr_number_of(session, comparison) is not None
    session.commit()
    if on_pull_request:
        finish(comparison_id)
    return get_comparison(comparison_id, session)


@router.get("/devices", response_model=list[DevicePublic])
def list_devices(session: SessionDep) -> Any:
    return queries.devices(session)
