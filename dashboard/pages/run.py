"""Run: suites with how they ended, measurements, test outcomes with errors, device."""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, HTTPException, Path, Request
from fastapi.responses import HTMLResponse
from sqlalchemy import or_
from sqlmodel import col, select

from roofwatch.dashboard.rendering import TEMPLATES
from roofwatch.service.core.models import (
    ROW_ID_MAX,
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
from roofwatch.service.core.requests import SessionDep
from roofwatch.service.records import compiled_artifacts


def register(app: FastAPI) -> None:
    @app.get("/runs/{run_id}", response_class=HTMLResponse, include_in_schema=False)
    def run_page(run_id: Annotated[int, Path(ge=0, le=ROW_ID_MAX)], request: Request,
                 session: SessionDep) -> HTMLResponse:
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
            "compiled": compiled_artifacts.for_run(session, run_id),
            # The A/B comparisons this run is decided by (a pull request) or whose head it measured.
            "comparisons": session.exec(select(Comparison).where(or_(
                col(Comparison.run_id) == run_id, col(Comparison.head_commit_id) == run.commit_id))
                .order_by(col(Comparison.id))).all(),
        })
