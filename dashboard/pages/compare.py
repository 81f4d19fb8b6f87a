"""Compare: what PR statuses and comments link to — the A/B verdict per benchmark, with its rounds.

Below the verdict table, the per-round values each verdict rests on: for the benchmarks that
moved or could not be decided, and for any other one asked for with ``?show=<benchmark id>``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Path, Query, Request
from fastapi.responses import HTMLResponse

from roofwatch.dashboard.common import TEMPLATES, chart_json
from roofwatch.dashboard.distribution_chart import distribution_figure
from roofwatch.dashboard.pr_comment import CommentRenderer, comment_html
from roofwatch.service.api.deps import SessionDep
from roofwatch.service.core.links import compare_url
from roofwatch.service.core.models import ROW_ID_MAX, Benchmark, Commit, Comparison, ComparisonResult, Repository, Run
from roofwatch.service.records.comparisons import comparison_report, results_of

# Drawn without being asked: the verdicts a reader wants explained. Capped so that a comparison
# of a thousand noisy benchmarks does not make the browser draw a thousand charts.
EXPLAINED = ("regression", "improvement", "inconclusive")
MAX_DEFAULT_CHARTS = 40


def _rows(results: list[tuple[ComparisonResult, Benchmark]]) -> list[dict[str, Any]]:
    """One row per benchmark, moved and larger changes first (the keys ``comparison_report`` uses, plus ids)."""
    rows = [{**result.model_dump(), "benchmark": benchmark.name, "suite": benchmark.suite, "unit": benchmark.unit,
             "higher_is_better": benchmark.higher_is_better, "dtype": benchmark.dtype, "shape": benchmark.shape,
             "rounds": len(result.base_values)}
            for result, benchmark in results]
    return sorted(rows, key=lambda r: (r["direction"] not in ("regression", "improvement"), -abs(r["change_pct"])))


def _charted(rows: list[dict[str, Any]], requested: list[int]) -> list[int]:
    """Benchmark ids to chart: those asked for, then moved and inconclusive ones up to the cap."""
    chosen = list(dict.fromkeys(requested))
    for row in rows:
        if len(chosen) >= MAX_DEFAULT_CHARTS + len(requested):
            break
        if row["direction"] in EXPLAINED and row["benchmark_id"] not in chosen:
            chosen.append(row["benchmark_id"])
    return chosen


def _pr_comment(request: Request, comparison: Comparison, repository: Repository, run: Run | None,
                report: dict[str, Any]) -> str:
    """The Markdown of the PR comment this comparison renders; empty when the app gave no renderer."""
    render: CommentRenderer | None = getattr(request.app.state, "render_pr_comment", None)
    if render is None:
        return ""
    base_ref = (comparison.details.get("pull_request", {}).get("base_ref") or comparison.details.get("base_ref")
                or repository.default_branch)
    return render(report, repository.full_name, (run.pr_number if run else None) or 0, base_ref,
                  compare_url(comparison.id))  # type: ignore[arg-type]


def register(app: FastAPI) -> None:
    @app.get("/compare/{comparison_id}", response_class=HTMLResponse, include_in_schema=False)
    def compare_page(
        comparison_id: Annotated[int, Path(ge=0, le=ROW_ID_MAX)], request: Request, session: SessionDep,
        show: Annotated[list[int] | None, Query(description="benchmark ids whose rounds to chart as well")] = None,
    ) -> HTMLResponse:
        comparison = session.get(Comparison, comparison_id)
        if comparison is None:
            raise HTTPException(404, f"no comparison {comparison_id}")
        results = results_of(session, comparison_id)  # read once: the report and the rows share them
        report = comparison_report(session, comparison_id, results)
        rows = _rows(results)
        by_id = {row["benchmark_id"]: row for row in rows}
        missing = [b for b in show or [] if b not in by_id]
        if missing:
            raise HTTPException(404, f"benchmark {missing[0]} is not part of comparison {comparison_id}")
        charts: list[dict[str, Any]] = [{
            "row": by_id[b],
            "figure": chart_json(distribution_figure(by_id[b]["base_values"], by_id[b]["head_values"],
                                                     by_id[b]["unit"], by_id[b]["higher_is_better"])),
        } for b in _charted(rows, show or [])]
        repository = session.get(Repository, comparison.repository_id)
        run = session.get(Run, comparison.run_id) if comparison.run_id else None
        assert repository is not None
        comment = _pr_comment(request, comparison, repository, run, report)
        return TEMPLATES.TemplateResponse(request, "compare.html", {
            "comparison": comparison, "report": report, "rows": rows, "charts": charts,
            "charted": {c["row"]["benchmark_id"] for c in charts}, "max_charts": MAX_DEFAULT_CHARTS,
            "repository": repository, "run": run,
            "comment_html": comment_html(comment) if comment else "", "comment_markdown": comment,
            "base": session.get(Commit, comparison.base_commit_id),
            "head": session.get(Commit, comparison.head_commit_id),
        })
