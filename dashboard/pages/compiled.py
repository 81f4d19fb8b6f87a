"""Compiled code: each Triton kernel's registers, spills, shared memory and SASS over commits.

``/compiled/{repository_id}`` lists the kernels with their latest numbers;
``/compiled/{repository_id}/kernel?name=...`` draws one kernel's history, one line per
specialization × target, with every commit whose binary changed marked.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Path, Query, Request
from fastapi.responses import HTMLResponse

from roofwatch.dashboard.escaping import plotly_text
from roofwatch.dashboard.rendering import TEMPLATES, chart_json
from roofwatch.service.analysis.compiled import diff
from roofwatch.service.core.models import ROW_ID_MAX, Commit, Repository
from roofwatch.service.core.requests import SessionDep
from roofwatch.service.records import compiled_artifacts
from roofwatch.service.records.compiled_artifacts import HistoryPoint

RepositoryId = Annotated[int, Path(ge=0, le=ROW_ID_MAX)]
# What the history chart plots, one panel each: (field, axis title).
PANELS = (("registers", "registers / thread"), ("shared_bytes", "shared memory (B)"),
          ("spill_bytes", "spills (B / thread)"), ("sass_instructions", "SASS instructions"))


def history_rows(points: list[HistoryPoint]) -> list[dict[str, Any]]:
    """One row per commit and specialization × target; ``change`` says how its binary differs from
    the previous commit's (a renamed specialization, e.g. a new block size, is paired with its old self)."""
    commits: dict[str, list[HistoryPoint]] = {}
    for point in points:
        commits.setdefault(point.sha, []).append(point)
    rows = []
    previous: list[Any] = []
    for sha, group in commits.items():
        artifacts = [p.artifact for p in group]
        changes = {(d.specialization.split(" → ")[-1], d.target): d.line()
                   for d in diff(previous, artifacts) if d.kind in ("changed", "now-fails", "compiles-again")}
        previous = artifacts
        for point in group:
            a = point.artifact
            rows.append({"sha": sha, "title": point.message, "specialization": a.specialization, "target": a.target,
                         "status": a.status, "reason": a.reason, "registers": a.registers,
                         "spill_bytes": a.spill_bytes, "shared_bytes": a.shared_bytes,
                         "sass_instructions": a.sass_instructions, "instructions": a.instructions,
                         "sass_hash": a.sass_hash, "change": changes.get((a.specialization, a.target), ""),
                         "changed": (a.specialization, a.target) in changes, "toolchain": a.toolchain,
                         "run_id": a.run_id})
    return rows


def history_figure(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Step lines per specialization × target in four stacked panels; commits in order on x."""
    order = list(dict.fromkeys(plotly_text(r["sha"][:10]) for r in rows))
    series: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        # Specializations, targets and commit titles are the repository's text; Plotly would read them as markup.
        series.setdefault(plotly_text(f"{row['specialization']} · {row['target']}"), []).append(row)
    data = []
    for index, (field, _) in enumerate(PANELS):
        axis = "" if index == 0 else str(index + 1)
        for name, points in series.items():
            data.append({"type": "scatter", "mode": "lines+markers", "line": {"shape": "hv"}, "name": name,
                         "legendgroup": name, "showlegend": index == 0, "xaxis": f"x{axis}", "yaxis": f"y{axis}",
                         "x": [plotly_text(p["sha"][:10]) for p in points], "y": [p[field] for p in points],
                         "customdata": [p["run_id"] for p in points],
                         "marker": {"symbol": ["diamond" if p["changed"] else "circle" for p in points],
                                    "size": [11 if p["changed"] else 6 for p in points]},
                         "hovertext": [plotly_text(p["title"]) for p in points]})
    height = 1.0 / len(PANELS)
    layout: dict[str, Any] = {"height": 220 * len(PANELS), "margin": {"t": 20, "l": 70, "r": 20, "b": 60},
                              "legend": {"orientation": "h", "y": -0.08}}
    for index, (_, title) in enumerate(PANELS):
        axis = "" if index == 0 else str(index + 1)
        top = 1.0 - index * height
        layout[f"yaxis{axis}"] = {"title": {"text": title}, "domain": [top - height + 0.04, top], "rangemode": "tozero"}
        layout[f"xaxis{axis}"] = {"type": "category", "categoryorder": "array", "categoryarray": order,
                                  "anchor": f"y{axis}", "showticklabels": index == len(PANELS) - 1}
    return {"data": data, "layout": layout}


def register(app: FastAPI) -> None:
    @app.get("/compiled/{repository_id}", response_class=HTMLResponse, include_in_schema=False)
    def compiled_kernels(repository_id: RepositoryId, request: Request, session: SessionDep) -> HTMLResponse:
        repository = session.get(Repository, repository_id)
        if repository is None:
            raise HTTPException(404, f"no repository {repository_id}")
        run = compiled_artifacts.latest_run(session, repository_id)
        latest = compiled_artifacts.for_run(session, run.id) if run is not None and run.id is not None else []
        return TEMPLATES.TemplateResponse(request, "compiled.html", {
            "repository": repository, "latest": latest, "run": run,
            "commit": session.get(Commit, run.commit_id) if run else None})

    @app.get("/compiled/{repository_id}/kernel", response_class=HTMLResponse, include_in_schema=False)
    def kernel_page(repository_id: RepositoryId, request: Request, session: SessionDep,
                    name: Annotated[str, Query(min_length=1, max_length=500)]) -> HTMLResponse:
        repository = session.get(Repository, repository_id)
        if repository is None:
            raise HTTPException(404, f"no repository {repository_id}")
        rows = history_rows(compiled_artifacts.kernel_history(session, repository_id, name))
        if not rows:
            raise HTTPException(404, f"no compiled artifacts of {name} in {repository.full_name}")
        return TEMPLATES.TemplateResponse(request, "compiled_kernel.html", {
            "repository": repository, "kernel": name, "rows": rows,
            "toolchains": sorted({r["toolchain"] for r in rows}),
            "figure": chart_json(history_figure(rows))})
