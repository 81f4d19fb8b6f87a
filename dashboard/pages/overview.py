"""Overview: repositories, open changes, a trend per benchmark, recent runs."""

from __future__ import annotations

import json

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse
from sqlmodel import select

from dashboard.common import TEMPLATES, figure_json
from dashboard.figures import PLOT_CONFIG, trend
from service import queries
from service.deps import SessionDep
from service.models import Repository


def register(app: FastAPI) -> None:
    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def overview(request: Request, session: SessionDep, repo: str | None = None) -> HTMLResponse:
        repositories = list(session.exec(select(Repository)).all())
        selected = next((r for r in repositories if r.full_name == repo), None)
        changes = queries.change_rows(session, selected.full_name if selected else None)
        charts = []
        for benchmark in queries.benchmarks(session, selected.id if selected else None):
            points = queries.series(session, benchmark.id)  # type: ignore[arg-type]
            if not points:
                continue
            mine = [c for c in changes if c["benchmark"] == benchmark.name and c["device_class"] == benchmark.device_class]
            latest = points[-1]
            charts.append({
                "benchmark": benchmark, "latest": latest, "count": len(points),
                "figure": figure_json(trend(benchmark, points, mine)),
            })
        return TEMPLATES.TemplateResponse(request, "overview.html", {
            "repositories": repositories, "selected": selected, "charts": charts,
            "runs": queries.recent_runs(session, selected.id if selected else None, 20),
            "changes": [c for c in changes if c["state"] in ("new", "acknowledged")],
            "config": json.dumps(PLOT_CONFIG),
        })
