"""Benchmark: one series over every commit, per device class, against its baselines, changes marked.

``/benchmarks/{id}?impl=torch&impl=torch.compile`` adds those baseline implementations of the same
test (same dtype, shape and device class) to the chart; the overview's filters ride along in the
URL so "back to overview" returns to the same view.

The chart shows a window of branch history — the newest ``DEFAULT_COMMITS`` commits unless
``?from=``/``?to=`` (branch positions) say otherwise — so the page costs what it draws, not what
the history holds (``roofwatch.dashboard.series_window``). A window longer than the chart can
draw is downsampled, every marked change and outlier kept (``roofwatch.dashboard.downsampling``).

Where the suite runs files from outside the commit (``suites_from``, ``suites_repo``), each point
where those files changed is marked as a *benchmark-files* event and listed under the chart: the
benchmark changed there, in the same series (``roofwatch.service.analysis.suite_files``).
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import FastAPI, HTTPException, Path, Query, Request
from fastapi.responses import HTMLResponse

from roofwatch.dashboard import figures, metrics, series_window
from roofwatch.dashboard import reads as dq
from roofwatch.dashboard.figures import Series, benchmark_figure
from roofwatch.dashboard.filters import Filters, FiltersDep
from roofwatch.dashboard.rendering import TEMPLATES, chart_json
from roofwatch.service.analysis import suite_files
from roofwatch.service.analysis.compiled import for_tests
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.models import ROW_ID_MAX, Benchmark, Repository
from roofwatch.service.core.requests import SessionDep, allow_unsafe_eval
from roofwatch.service.records import compiled_artifacts
from roofwatch.service.records.series import suite_files_by_run

ImplQuery = Annotated[list[str] | None, Query(description="baseline implementations to add to the chart")]


def href(benchmark_id: int, filters: Filters, impls: list[str]) -> str:
    params = [*filters.active.items(), *(("impl", impl) for impl in impls)]
    return f"/benchmarks/{benchmark_id}" + ("?" + urlencode(params) if params else "")


def impl_label(impl: str) -> str:
    return impl or "kernel"


def _series_name(benchmark: Benchmark, same_impl: int, with_device: bool) -> str:
    name = impl_label(benchmark.impl)
    if same_impl > 1:  # several parametrisations of one baseline: tell them apart
        name += f" {benchmark.name[len(dq.test_function(benchmark.name)):]}"
    return f"{name} · {benchmark.device_class}" if with_device else name


def build_series(benchmark: Benchmark, devices: list[Benchmark], baselines: list[Benchmark],
                 points: dict[int, list[dict[str, Any]]]) -> tuple[list[Series], metrics.Metric]:
    """The chart's series, every one in the viewed benchmark's metric and one shared unit."""
    kind = metrics.kind_of(benchmark)
    shown = [*devices, *baselines]
    series = []
    for other in shown:
        assert other.id is not None
        rows = points.get(other.id, [])
        values = metrics.values(kind, metrics.work_of(other, kind, fallback=benchmark), rows)
        same_impl = sum(1 for b in baselines if b.impl == other.impl)
        series.append(Series(_series_name(other, same_impl, with_device=len(shown) > 1), other.id, rows, values,
                             baseline=other.impl != benchmark.impl))
    metric = metrics.metric(kind, benchmark, [v for s in series for v in s.values])
    return series, metric


def _toggles(benchmark: Benchmark, filters: Filters, available: list[str], selected: list[str]) -> list[dict[str, Any]]:
    """Links that switch baselines on and off; the chosen set lives in the URL."""
    assert benchmark.id is not None
    toggles = [{"label": f"{impl_label(benchmark.impl)} only", "href": href(benchmark.id, filters, []),
                "active": not selected}]
    for impl in available:
        chosen = [i for i in selected if i != impl] if impl in selected else [*selected, impl]
        toggles.append({"label": ("− " if impl in selected else "+ ") + impl_label(impl),
                        "href": href(benchmark.id, filters, chosen), "active": impl in selected})
    if len(available) > 1:
        toggles.append({"label": "all baselines", "href": href(benchmark.id, filters, available),
                        "active": selected == available})
    return toggles


def _filter_links(benchmark: Benchmark, repository: Repository | None) -> list[dict[str, str]]:
    """Overview links narrowed to what this benchmark is: its suite, kernel, dtype, shape, device."""
    repo = repository.full_name if repository else ""
    wanted = {"suite": benchmark.suite, "kernel": dq.test_function(benchmark.name), "dtype": benchmark.dtype,
              "shape": benchmark.shape, "device": benchmark.device_class}
    return [{"field": field, "value": value, "href": "/" + Filters(repo=repo, **{field: value}).query_string()}
            for field, value in wanted.items() if value]


def _window(session: SessionDep, benchmark: Benchmark, shown: list[int], first: int | None,
            last: int | None) -> series_window.Window | None:
    """The commits to draw; ``None`` (draw everything) for a history without branch positions."""
    bounds = series_window.bounds(session, benchmark.repository_id, shown)
    return series_window.choose(*bounds, first, last) if bounds else None


def _commit_text_for_drawn(session: SessionDep, series: list[Series], changes: list[dict[str, Any]]) -> None:
    """Fetch the commit text (hover: title, author) of the points the chart will draw, not of the window.

    The chart picks them itself (``figures.decimate``, deterministic); the same pick here tells
    which 1,500 of a 20,000-point window need their commit's message read.
    """
    marked = {c["commit_id"] for c in changes if c["commit_id"] is not None}
    drawn = []
    for s in series:
        keep = [i for i, p in enumerate(s.points) if p["commit_id"] in marked]
        drawn += [s.points[i] for i in figures.decimate(s.values, keep, figures.MAX_POINTS) if "title" not in s.points[i]]
    series_window.with_commits(session, drawn)


def _window_links(benchmark: Benchmark, filters: Filters, impls: list[str],
                  window: series_window.Window | None) -> list[dict[str, str]]:
    """Earlier commits, the whole history, back to the newest: the window lives in the URL too."""
    if window is None:
        return []
    assert benchmark.id is not None
    base = href(benchmark.id, filters, impls)
    join = "&" if "?" in base else "?"
    step = series_window.DEFAULT_COMMITS
    links = []
    if not window.from_start:
        earlier = max(window.oldest, window.first - step)
        links.append({"label": f"load {window.first - earlier:,} earlier commits",
                      "href": f"{base}{join}{urlencode({'from': earlier, 'to': window.last})}"})
        links.append({"label": f"whole history ({window.newest - window.oldest + 1:,} commits)",
                      "href": f"{base}{join}from=0"})
    if window.commits != min(step, window.newest - window.oldest + 1) or not window.to_end:
        links.append({"label": f"newest {step:,} commits", "href": base})
    return links


def files_events(session: SessionDep, benchmark: Benchmark, devices: list[Benchmark],
                 points: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The benchmark-files events of the drawn series of the viewed test (on each device class), oldest first.

    Within what is drawn: a window's first point is not compared with the point before the window.
    One look-up of the suite's files for the drawn runs.
    """
    drawn = [p for d in devices if d.id is not None for p in points.get(d.id, [])]
    files = suite_files_by_run(session, [p["run_id"] for p in drawn], benchmark.suite)
    found: dict[tuple[int, int], dict[str, Any]] = {}
    for device in devices:
        series = points.get(device.id or -1, [])
        commit_of = {p["run_id"]: p["commit_id"] for p in series}
        for event in suite_files.events([suite_files.FilesPoint(p["position"], p["sha"], p["run_id"],
                                                                files.get(p["run_id"], {})) for p in series]):
            found.setdefault((commit_of[event.run_id], event.run_id), {
                **event.as_dict(), "commit_id": commit_of[event.run_id], "device_class": device.device_class,
                "label": event.said()})
    return sorted(found.values(), key=lambda e: (e["position"] is not None, e["position"] or 0, e["run_id"]))


def _noise(values: list[float | None]) -> dict[str, Any] | None:
    """The series' run-to-run noise and what an A/B within the round cap can tell at it."""
    noise = metrics.noise_pct(values)
    return None if noise is None else {"noise_pct": noise,
                                       **(metrics.judgeable(noise, get_settings().ab_max_rounds) or {})}


def register(app: FastAPI) -> None:
    @app.get("/benchmarks/{benchmark_id}", response_class=HTMLResponse, include_in_schema=False)
    def benchmark_page(benchmark_id: Annotated[int, Path(ge=0, le=ROW_ID_MAX)], request: Request, session: SessionDep, filters: FiltersDep,
                       impl: ImplQuery = None,
                       first: Annotated[int | None, Query(alias="from", ge=0, le=2**31 - 1,
                                                          description="oldest branch position drawn")] = None,
                       last: Annotated[int | None, Query(alias="to", ge=0, le=2**31 - 1,
                                                         description="newest branch position drawn")] = None,
                       ) -> HTMLResponse:
        benchmark = session.get(Benchmark, benchmark_id)
        if benchmark is None:
            raise HTTPException(404, f"no benchmark {benchmark_id}")
        devices = dq.siblings(session, benchmark)
        others = dq.alternatives(session, benchmark)
        available = sorted({b.impl for b in others})
        # Unknown names are dropped, not an error: a baseline may stop being recorded.
        selected = [i for i in available if i in (impl or [])]
        baselines = [b for b in others if b.impl in selected]
        shown = [b.id for b in [*devices, *baselines] if b.id is not None]
        window = _window(session, benchmark, shown, first, last)
        points = (series_window.points(session, benchmark.repository_id, shown, window) if window
                  else dq.full_series(session, shown))
        series, metric = build_series(benchmark, devices, baselines, points)
        changes = dq.series_changes(session, shown)
        events = files_events(session, benchmark, devices, points)
        _commit_text_for_drawn(session, series, [*changes, *events])
        figure, drawn = benchmark_figure(series, changes, metric, events=events)
        if any(trace["type"] == "scattergl" for trace in figure["data"]):
            allow_unsafe_eval(request)  # WebGL traces compile their shaders at run time
        repository = session.get(Repository, benchmark.repository_id)
        compiled_run = compiled_artifacts.latest_run(session, benchmark.repository_id)
        compiled = (for_tests(compiled_artifacts.for_run(session, compiled_run.id), [benchmark.name])
                    if compiled_run and compiled_run.id is not None else [])
        return TEMPLATES.TemplateResponse(request, "benchmark.html", {
            "compiled": compiled,
            "benchmark": benchmark, "repository": repository, "filters": filters,
            "devices": devices, "toggles": _toggles(benchmark, filters, available, selected),
            "filter_links": _filter_links(benchmark, repository),
            "figure": chart_json(figure), "drawn": drawn,
            "max_points": figures.MAX_POINTS, "metric": metric, "changes": changes, "events": events,
            "names": {s.benchmark_id: s.name for s in series},
            "window": window, "window_links": _window_links(benchmark, filters, selected, window),
            "noise": _noise(series[0].values if series else []),
            "environment": dq.latest_environment(session, benchmark),
        })
