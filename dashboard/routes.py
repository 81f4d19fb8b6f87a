"""Dashboard pages. Read-only: they query through ``service.queries``."""

from __future__ import annotations

import json
from pathlib import Path

import plotly
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.templating import Jinja2Templates
from plotly.utils import PlotlyJSONEncoder
from sqlmodel import select

from dashboard.figures import PLOT_CONFIG, trend
from service import queries
from service.deps import SessionDep
from service.models import (
    Benchmark,
    Commit,
    Comparison,
    Device,
    Measurement,
    Repository,
    Run,
    SuiteExecution,
    TestOutcome,
)

TEMPLATES = Jinja2Templates(directory=Path(__file__).parent / "templates")
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def _figure_json(figure: dict[str, object]) -> str:
    return json.dumps(figure, cls=PlotlyJSONEncoder)


def mount(app: FastAPI) -> None:
    @app.get("/static/plotly.min.js", include_in_schema=False)
    def plotly_js() -> FileResponse:
        # Served from the installed plotly package: the dashboard works offline and air-gapped.
        return FileResponse(PLOTLY_JS, media_type="application/javascript",
                            headers={"Cache-Control": "public, max-age=86400"})

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
                "figure": _figure_json(trend(benchmark, points, mine)),
            })
        return TEMPLATES.TemplateResponse(request, "overview.html", {
            "repositories": repositories, "selected": selected, "charts": charts,
            "runs": queries.recent_runs(session, selected.id if selected else None, 20),
            "changes": [c for c in changes if c["state"] in ("new", "acknowledged")],
            "config": json.dumps(PLOT_CONFIG),
        })

    @app.get("/runs/{run_id}", response_class=HTMLResponse, include_in_schema=False)
    def run_page(run_id: int, request: Request, session: SessionDep) -> HTMLResponse:
        run = session.get(Run, run_id)
        if run is None:
            raise HTTPException(404, f"no run {run_id}")
        measurements = session.exec(
            select(Measurement, Benchmark).join(Benchmark).where(Measurement.run_id == run_id)).all()
        return TEMPLATES.TemplateResponse(request, "run.html", {
            "run": run, "commit": session.get(Commit, run.commit_id),
            "repository": session.get(Repository, run.repository_id),
            "device": session.get(Device, run.device_id) if run.device_id else None,
            "suites": session.exec(select(SuiteExecution).where(SuiteExecution.run_id == run_id)).all(),
            "outcomes": session.exec(select(TestOutcome).where(TestOutcome.run_id == run_id)
                                     .order_by(TestOutcome.outcome, TestOutcome.test_id)).all(),
            "measurements": measurements,
        })

    @app.get("/compare/{comparison_id}", response_class=HTMLResponse, include_in_schema=False)
    def compare_page(comparison_id: int, request: Request, session: SessionDep) -> HTMLResponse:
        """What PR statuses and comments link to: the A/B verdict, per benchmark, with its rounds."""
        from service.comparisons import comparison_report

        comparison = session.get(Comparison, comparison_id)
        if comparison is None:
            raise HTTPException(404, f"no comparison {comparison_id}")
        report = comparison_report(session, comparison_id)
        rows = sorted(report["benchmarks"], key=lambda r: (r["direction"] not in ("regression", "improvement"),
                                                           -abs(r["change_pct"] or 0.0)))
        return TEMPLATES.TemplateResponse(request, "compare.html", {
            "comparison": comparison, "report": report, "rows": rows,
            "repository": session.get(Repository, comparison.repository_id),
            "run": session.get(Run, comparison.run_id) if comparison.run_id else None,
            "base": session.get(Commit, comparison.base_commit_id),
            "head": session.get(Commit, comparison.head_commit_id),
        })
