"""Compare: what PR statuses and comments link to — the A/B verdict per benchmark, with its rounds.

Below the verdict table, the per-round values each verdict rests on: for the benchmarks that
moved or could not be decided, and for any other one asked for with ``?show=<benchmark id>``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Path, Query, Request
from fastapi.responses import HTMLResponse

from roofwatch.ab.abtest import CONFIDENCE
from roofwatch.dashboard.distribution_chart import distribution_figure
from roofwatch.dashboard.pr_comment import CommentRenderer, comment_html
from roofwatch.dashboard.rendering import TEMPLATES, chart_json
from roofwatch.service.core.comparison_details import details_of
from roofwatch.service.core.links import compare_url
from roofwatch.service.core.models import ROW_ID_MAX, Benchmark, Commit, Comparison, ComparisonResult, Repository, Run
from roofwatch.service.core.reports import ComparisonReport
from roofwatch.service.core.requests import SessionDep
from roofwatch.service.core.units import level_text
from roofwatch.service.records.comparisons import comparison_report, results_of

# Drawn without being asked: the verdicts a reader wants explained. Capped so that a comparison
# of a thousand noisy benchmarks does not make the browser draw a thousand charts.
EXPLAINED = ("regression", "improvement", "interaction", "inconclusive")
MAX_DEFAULT_CHARTS = 40
# Rows of the verdict table without ``?all=1``: every benchmark that moved or could not be
# decided, then this many of the rest (largest change first). A comparison of a thousand
# benchmarks then costs what a reader looks at; the whole table is one link away.
UNCHANGED_SHOWN = 50


def _rows(results: list[tuple[ComparisonResult, Benchmark]], report: ComparisonReport) -> list[dict[str, Any]]:
    """One row per benchmark, moved and larger changes first (the keys ``comparison_report`` uses, plus ids)."""
    level = report.get("confidence") or CONFIDENCE
    levels = {(r.get("suite"), r.get("benchmark")): r.get("confidence", level) for r in report.get("benchmarks", [])}
    rows = [{**result.model_dump(), "benchmark": benchmark.name, "suite": benchmark.suite, "unit": benchmark.unit,
             "higher_is_better": benchmark.higher_is_better, "dtype": benchmark.dtype, "shape": benchmark.shape,
             "rounds": len(result.base_values), "confidence": levels.get((benchmark.suite, benchmark.name), level)}
            for result, benchmark in results]
    return sorted(rows, key=lambda r: (r["direction"] not in ("regression", "improvement"), -abs(r["change_pct"])))


def _listed(rows: list[dict[str, Any]], everything: bool) -> list[dict[str, Any]]:
    """The verdict table's rows: all of them, or the explained ones and ``UNCHANGED_SHOWN`` others."""
    if everything:
        return rows
    explained = [r for r in rows if r["direction"] in EXPLAINED]
    return explained + [r for r in rows if r["direction"] not in EXPLAINED][:UNCHANGED_SHOWN]


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
                report: ComparisonReport) -> str:
    """The Markdown of the PR comment this comparison renders; empty when the app gave no renderer."""
    render: CommentRenderer | None = getattr(request.app.state, "render_pr_comment", None)
    if render is None:
        return ""
    details = details_of(comparison)
    base_ref = (details.get("pull_request", {}).get("base_ref") or details.get("base_ref")
                or repository.default_branch)
    return render(report, repository.full_name, (run.pr_number if run else None) or 0, base_ref,
                  compare_url(comparison.id))  # type: ignore[arg-type]


@dataclass(frozen=True)
class _Computed:
    """What a comparison's page is built from: its rows, its report and its PR comment's Markdown."""

    rows: list[dict[str, Any]]
    report: ComparisonReport
    comment: str


# A finished comparison does not change, and reading a thousand results with their per-round
# values, building its report and rendering its comment costs ~150 ms of CPU: kept for the few
# comparisons people are looking at, keyed by everything that would differ if it ran again.
FINISHED_KEPT = 16
_finished: OrderedDict[tuple[Any, ...], _Computed] = OrderedDict()
_finished_lock = threading.Lock()


def _computed(request: Request, session: SessionDep, comparison: Comparison, repository: Repository,
              run: Run | None) -> _Computed:
    render = getattr(request.app.state, "render_pr_comment", None)
    key = (id(render), repository.id, comparison.id, comparison.created_at, comparison.finished_at, comparison.state,
           comparison.verdict, comparison.rounds) if comparison.finished_at else None
    with _finished_lock:
        if key is not None and key in _finished:
            _finished.move_to_end(key)
            return _finished[key]
    results = results_of(session, comparison.id)  # type: ignore[arg-type]  # read once: report and rows share them
    report = comparison_report(session, comparison.id, results)  # type: ignore[arg-type]
    computed = _Computed(_rows(results, report), report, _pr_comment(request, comparison, repository, run, report))
    if key is not None:
        with _finished_lock:
            _finished[key] = computed
            while len(_finished) > FINISHED_KEPT:
                _finished.popitem(last=False)
    return computed


def register(app: FastAPI) -> None:
    @app.get("/compare/{comparison_id}", response_class=HTMLResponse, include_in_schema=False)
    def compare_page(
        comparison_id: Annotated[int, Path(ge=0, le=ROW_ID_MAX)], request: Request, session: SessionDep,
        show: Annotated[list[int] | None, Query(description="benchmark ids whose rounds to chart as well")] = None,
        all: Annotated[bool, Query(description="list every benchmark, not only those that moved and a few others")] = False,  # noqa: A002
    ) -> HTMLResponse:
        comparison = session.get(Comparison, comparison_id)
        if comparison is None:
            raise HTTPException(404, f"no comparison {comparison_id}")
        repository = session.get(Repository, comparison.repository_id)
        run = session.get(Run, comparison.run_id) if comparison.run_id else None
        assert repository is not None
        computed = _computed(request, session, comparison, repository, run)
        rows, report, comment = computed.rows, computed.report, computed.comment
        by_id = {row["benchmark_id"]: row for row in rows}
        missing = [b for b in show or [] if b not in by_id]
        if missing:
            raise HTTPException(404, f"benchmark {missing[0]} is not part of comparison {comparison_id}")
        charts: list[dict[str, Any]] = [{
            "row": by_id[b],
            "figure": chart_json(distribution_figure(by_id[b]["base_values"], by_id[b]["head_values"],
                                                     by_id[b]["unit"], by_id[b]["higher_is_better"])),
        } for b in _charted(rows, show or [])]
        listed = _listed(rows, all)
        charted = {c["row"]["benchmark_id"] for c in charts}
        level = report.get("confidence") or CONFIDENCE
        adjusted = sorted({r["confidence"] for r in rows if r["confidence"] != level})
        return TEMPLATES.TemplateResponse(request, "compare.html", {
            "comparison": comparison, "report": report, "rows": listed, "total": len(rows), "listed_all": all,
            "explained": sum(1 for r in rows if r["direction"] in EXPLAINED), "unchanged_shown": UNCHANGED_SHOWN,
            "charts": charts, "unlisted": [r for r in listed if r["benchmark_id"] not in charted],
            "charted": charted, "max_charts": MAX_DEFAULT_CHARTS,
            "level": level_text(level), "adjusted_levels": " / ".join(level_text(c) for c in adjusted),
            "repository": repository, "run": run,
            "comment_html": comment_html(comment) if comment else "", "comment_markdown": comment,
            "base": session.get(Commit, comparison.base_commit_id),
            "head": session.get(Commit, comparison.head_commit_id),
        })
