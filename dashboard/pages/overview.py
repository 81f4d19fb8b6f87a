"""Overview: repositories and their verdicts, open changes, a table of benchmark trends, recent runs.

Built to stay fast with a thousand benchmarks over thousands of commits: benchmarks are paged,
and a page's trends come from one windowed query for its last ``SPARK_POINTS`` points each.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import FastAPI, Query, Request
from fastapi.responses import HTMLResponse

from roofwatch.dashboard import metrics
from roofwatch.dashboard import reads as dq
from roofwatch.dashboard.figures import sparkline_svg
from roofwatch.dashboard.filters import Filters, FiltersDep, choices
from roofwatch.dashboard.rendering import TEMPLATES
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.models import Benchmark
from roofwatch.service.core.requests import SessionDep
from roofwatch.service.records import queries

SPARK_POINTS = 30
PER_PAGE = 100  # rows of benchmarks per page: one windowed query of 100 × 30 points
OPEN_CHANGES_SHOWN = 50
RECENT_RUNS = 20
RECENT_COMPARISONS = 10  # pull requests, `roofwatch compare`, confirmations: each links its compare page


def benchmark_row(benchmark: Benchmark, points: list[dict[str, Any]], detected: str | None = None) -> dict[str, Any]:
    """One table row: the sparkline, latest value and trend, all in the benchmark's own metric.

    ``detected`` is the kind of a confirmed change inside the trend's window, if there is one.
    """
    kind = metrics.kind_of(benchmark)
    series = metrics.values(kind, metrics.work_of(benchmark, kind), points)
    latest = points[-1] if points else None
    delta = metrics.trend_pct(series)
    noise = metrics.noise_pct(series)
    history = min(len([v for v in series if v is not None]) - 1, metrics.TREND_WINDOW)
    view = metrics.trend_view(delta, noise, history, metrics.higher_is_better(kind, benchmark), detected)
    return {
        "benchmark": benchmark, "points": len(points), "sparkline": sparkline_svg(series),
        "latest": metrics.human(kind, series[-1] if series else None, benchmark.unit),
        "latest_run": latest["run_id"] if latest else None,
        "roofline": None if latest is None or latest["roofline_fraction"] is None
        else 100 * latest["roofline_fraction"],
        "trend": delta, "trend_class": view.css, "trend_why": view.why,
        "noise": noise if view.css == "muted" else None,
        "judgeable": metrics.judgeable(noise, get_settings().ab_max_rounds),
    }



def changes_links(filters: Filters) -> dict[str, str]:
    """Links into the changes page, which filters by repository and state (not by benchmark fields)."""
    repo = [("repo", filters.repo)] if filters.repo else []
    return {"open": "/changes?" + urlencode([*repo, *(("state", s) for s in dq.OPEN_STATES)]),
            "any": "/changes" + ("?" + urlencode(repo) if repo else "")}


def register(app: FastAPI) -> None:
    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def overview(request: Request, session: SessionDep, filters: FiltersDep,
                 page: Annotated[int, Query(ge=1, le=100_000)] = 1,
                 per_page: Annotated[int, Query(ge=1, le=500)] = PER_PAGE) -> HTMLResponse:
        benchmarks, total = dq.benchmark_page(session, filters, page, per_page)
        points = dq.recent_points(session, [b.id for b in benchmarks if b.id is not None], SPARK_POINTS)
        detected = dq.detected_in_windows(
            session, {i: p[-metrics.TREND_WINDOW - 1:] for i, p in points.items()})
        changes, open_total = dq.open_changes(session, filters, OPEN_CHANGES_SHOWN)
        repo_id = dq.repository_id(session, filters.repo) if filters.repo else None
        pages = max(1, -(-total // per_page))
        return TEMPLATES.TemplateResponse(request, "overview.html", {
            "filters": filters, "choices": choices(session),
            "repositories": dq.repository_heads(session, filters),
            "changes": changes, "open_total": open_total, "changes_links": changes_links(filters),
            "rows": [benchmark_row(b, points.get(b.id, []), detected.get(b.id)) for b in benchmarks if b.id is not None],
            "total": total, "page": page, "pages": pages, "per_page": per_page,
            # Page links carry per_page only when it is not the default, to keep URLs short.
            "paging": {} if per_page == PER_PAGE else {"per_page": str(per_page)},
            "spark_points": SPARK_POINTS,
            # An unknown repository selects nothing rather than everything.
            "runs": [] if filters.repo and repo_id is None else queries.recent_runs(session, repo_id, RECENT_RUNS),
            "comparisons": [] if filters.repo and repo_id is None
            else queries.recent_comparisons(session, repo_id, RECENT_COMPARISONS),
        })
