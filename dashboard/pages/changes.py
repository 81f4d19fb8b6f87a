"""Changes: the triage list, and the buttons that triage (for whoever holds the API token).

``/changes?state=new&state=acknowledged&kind=perf-regression&repo=acme/kernels``: each filter is
optional and ``state``/``kind`` repeat. Without a state filter every change is listed, the ones
still waiting for a person (new, then acknowledged) first.

The buttons call ``PATCH /api/changes/{id}`` from the browser with the token the reader typed
into the page; the token stays in that tab's ``sessionStorage``, never in a URL or a cookie,
so this page itself needs no authentication and never sees it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse
from sqlalchemy import ColumnElement, case, func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from roofwatch.common.vocabulary import CHANGE_KINDS, OPEN_STATES, TRIAGE_STATES, ChangeKind
from roofwatch.dashboard.reads import METRIC_COLUMNS, metric_of
from roofwatch.dashboard.rendering import TEMPLATES
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.models import Benchmark, Change, Commit, Repository
from roofwatch.service.core.requests import SessionDep
from roofwatch.service.records.changes import members, shown, test_name

# A page lists this many: what a person triages in one sitting. The rest is a page away, so the
# page costs what it shows however many changes a year of history holds (2,629 at 20 M measurements).
DEFAULT_LIMIT = 100


@dataclass(frozen=True)
class ChangeFilters:
    states: tuple[str, ...]
    kinds: tuple[str, ...]
    repo: str

    def conditions(self, with_state: bool = True) -> list[ColumnElement[bool]]:
        found: list[ColumnElement[bool]] = [shown()]
        if with_state and self.states:
            found.append(col(Change.state).in_(self.states))
        if self.kinds:
            found.append(col(Change.kind).in_(self.kinds))
        if self.repo:
            found.append(col(Change.repository_id).in_(select(Repository.id).where(Repository.full_name == self.repo)))
        return found


def _checked(values: list[str], allowed: tuple[str, ...], name: str) -> tuple[str, ...]:
    """The values asked for, each one of ``allowed`` (else 422); empty ones are the form's "all"."""
    values = [v for v in values if v]
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        raise HTTPException(422, f"unknown {name} {', '.join(map(repr, unknown))}; one of {', '.join(allowed)}")
    return tuple(dict.fromkeys(values))  # keep the order given, drop repeats


def change_rows(session: Session, filters: ChangeFilters, limit: int, offset: int = 0) -> list[dict[str, Any]]:
    """One page of the filtered changes with their repository, benchmark and first bad commit, in one query."""
    rank = case({state: i for i, state in enumerate(OPEN_STATES)}, value=col(Change.state), else_=len(OPEN_STATES))
    query = (sa_select(Change, col(Repository.full_name), col(Benchmark.name), col(Benchmark.device_class),
                       col(Benchmark.shape), col(Benchmark.dtype), col(Commit.sha), *METRIC_COLUMNS)
             .join(Repository, col(Repository.id) == col(Change.repository_id))
             .outerjoin(Benchmark, col(Benchmark.id) == col(Change.benchmark_id))
             .outerjoin(Commit, col(Commit.id) == col(Change.first_bad_commit_id))
             .where(*filters.conditions())
             .order_by(rank, col(Change.id).desc()).limit(limit).offset(offset))
    return [{
        "change": change, "repository": repository, "benchmark": name or test_name(change.test_id, change.details),
        "tests": members(change) if change.kind == ChangeKind.CORRECTNESS_FAILURE else [],
        "device_class": device_class, "shape": shape, "dtype": dtype, "commit": sha,
        "history": list(change.details.get("triage", [])), "metric_kind": metric_of(*work),
    } for change, repository, name, device_class, shape, dtype, sha, *work in session.execute(query).all()]


def state_counts(session: Session, filters: ChangeFilters) -> dict[str, int]:
    """How many changes each triage state holds under the kind and repository filters."""
    query = (sa_select(col(Change.state), func.count()).where(*filters.conditions(with_state=False))
             .group_by(col(Change.state)))
    counts = {state: int(count) for state, count in session.execute(query).all()}
    return {state: counts.get(state, 0) for state in TRIAGE_STATES}


def _page_url(request: Request, page: int) -> str:
    """This listing's URL with its filters, on another page."""
    kept = [(k, v) for k, v in request.query_params.multi_items() if k != "page"]
    return f"{request.url.path}?{urlencode([*kept, ('page', str(page))])}"


def register(app: FastAPI) -> None:
    @app.get("/changes", response_class=HTMLResponse, include_in_schema=False)
    def changes_page(
        request: Request, session: SessionDep,
        state: Annotated[list[str] | None, Query(description="triage states to list; repeat for several")] = None,
        kind: Annotated[list[str] | None, Query(description="change kinds to list; repeat for several")] = None,
        repo: Annotated[str, Query(max_length=200)] = "",
        limit: Annotated[int, Query(ge=1, le=5000)] = DEFAULT_LIMIT,
        page: Annotated[int, Query(ge=1, le=100_000, description="which page of `limit` changes")] = 1,
    ) -> HTMLResponse:
        filters = ChangeFilters(_checked(state or [], TRIAGE_STATES, "state"),
                                _checked(kind or [], CHANGE_KINDS, "kind"), repo)
        counts = state_counts(session, filters)
        total = sum(counts[s] for s in (filters.states or TRIAGE_STATES))
        rows = change_rows(session, filters, limit, (page - 1) * limit)
        pages = max(1, -(-total // limit))
        return TEMPLATES.TemplateResponse(request, "changes.html", {
            "rows": rows, "filters": filters, "counts": counts, "limit": limit, "total": total,
            "page": page, "pages": pages, "first": (page - 1) * limit + 1,
            "earlier": _page_url(request, page - 1) if page > 1 else "",
            "later": _page_url(request, page + 1) if page < pages else "",
            "states": TRIAGE_STATES, "kinds": CHANGE_KINDS,
            "repositories": list(session.exec(select(Repository.full_name).order_by(col(Repository.full_name))).all()),
            "writes_enabled": bool(get_settings().api_token),
        })
