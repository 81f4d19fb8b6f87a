"""Compare: what PR statuses and comments link to — the A/B verdict per benchmark, with its rounds."""

from __future__ import annotations

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse

from dashboard.common import TEMPLATES
from service.comparisons import comparison_report
from service.deps import SessionDep
from service.models import Commit, Comparison, Repository, Run


def register(app: FastAPI) -> None:
    @app.get("/compare/{comparison_id}", response_class=HTMLResponse, include_in_schema=False)
    def compare_page(comparison_id: int, request: Request, session: SessionDep) -> HTMLResponse:
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
