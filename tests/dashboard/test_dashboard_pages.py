"""Overview and benchmark pages, server-side: over the real seeded history and over small synthetic ones.

The synthetic history (``synthetic_app``, on SQLite and PostgreSQL) has what the seeded one lacks: a
kernel measured on two device classes, a torch baseline, pull-request runs and triaged changes.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, col, select
from support.environment import _reset_caches

from roofwatch.dashboard.figures import decimate, sparkline_svg
from roofwatch.dashboard.metrics import human, kind_of, noise_pct, trend_pct, trend_view
from roofwatch.service.core.db import downgrade, make_engine, migrate
from roofwatch.service.core.models import Benchmark, Change, Commit, Measurement, Repository, Run
from roofwatch.service.records import latest

COMMITS = 40
REGRESSION_AT = 30  # the H200 kernel gets 20 % slower here
IMPROVEMENT_AT = 10  # an improvement, triaged as expected
H200, A100 = "NVIDIA H200", "NVIDIA A100"
SOFTMAX_BYTES = 2 * 4096 * 4096 * 2


def sha(i: int) -> str:
    return hashlib.sha1(str(i).encode()).hexdigest()


def figure_of(html: str) -> dict[str, Any]:
    match = re.search(r'<script type="application/json" id="figure">(.*?)</script>', html, re.S)
    assert match, "the page embeds its figure"
    figure: dict[str, Any] = json.loads(match.group(1))
    return figure


def spark_vertices(row: str) -> int:
    match = re.search(r'<svg class="spark".*?points="([^"]+)"', row, re.S)
    return len(match.group(1).split()) if match else 0


def table_rows(html: str, table_id: str) -> list[str]:
    match = re.search(rf'<table id="{table_id}">(.*?)</table>', html, re.S)
    assert match, f"no table #{table_id}"
    return re.findall(r"<tr[ >].*?</tr>", match.group(1), re.S)[1:]  # header row left out


# --- the synthetic history ---------------------------------------------------------------------

def _benchmark(repository_id: int, key: str, name: str, device: str, impl: str = "", dtype: str = "bf16",
               **extra: Any) -> Benchmark:
    return Benchmark(fingerprint=key, repository_id=repository_id, suite="benchmarks", name=name, dtype=dtype,
                     shape="4096x4096", device_class=device, impl=impl, **extra)


def _measure(run: Run, benchmark: Benchmark, median: float) -> Measurement:
    roofline = benchmark.bytes / median / 4.8e12 if benchmark.bytes else None
    return Measurement(run_id=run.id, benchmark_id=benchmark.id, samples=[median], median=median, iqr=median / 50,
                       min=median * 0.98, mean=median, n=20, cv=0.01, roofline_fraction=roofline)


def seed_synthetic(url: str) -> None:
    """40 commits on acme/synth; softmax on H200 and A100 plus a torch baseline; a matmul; changes."""
    engine = make_engine(url)
    with Session(engine) as session:
        repository = Repository(full_name="acme/synth", clone_url="file:///nowhere")
        session.add(repository)
        session.flush()
        assert repository.id is not None
        ours = _benchmark(repository.id, "k-h200", "test_softmax[triton-4096]", H200, bytes=SOFTMAX_BYTES)
        ours_a100 = _benchmark(repository.id, "k-a100", "test_softmax[triton-4096]", A100, bytes=SOFTMAX_BYTES)
        torch = _benchmark(repository.id, "t-h200", "test_softmax[torch-4096]", H200, impl="torch",
                           bytes=SOFTMAX_BYTES)
        matmul = _benchmark(repository.id, "m-h200", "test_matmul", H200, dtype="fp16", flops=2 * 4096**3)
        sparse = _benchmark(repository.id, "s-a100", "test_sparse", A100, dtype="fp32")  # every 10th commit
        session.add_all([ours, ours_a100, torch, matmul, sparse])
        start = datetime(2025, 1, 1, tzinfo=UTC)
        commits = []
        for i in range(COMMITS):
            commit = Commit(repository_id=repository.id, sha=sha(i), author="Kernel Dev",
                            message=f"commit {i}\n\nbody", committed_at=start + timedelta(hours=i), position=i + 1)
            session.add(commit)
            session.flush()
            commits.append(commit)
            run = Run(repository_id=repository.id, commit_id=commit.id, trigger="push", state="succeeded",
                      idempotency_key=f"push-{i}")
            session.add(run)
            session.flush()
            slow = 1.2 if i >= REGRESSION_AT else 1.0
            session.add_all([_measure(run, ours, 1e-4 * slow), _measure(run, ours_a100, 1.5e-4),
                             _measure(run, torch, 1.3e-4), _measure(run, matmul, 2e-3)])
            if i % 10 == 0:
                session.add(_measure(run, sparse, 1e-3 + i * 1e-6))
        # A pull request measured far off the trend: it must not appear on it.
        pr = Run(repository_id=repository.id, commit_id=commits[-1].id, trigger="pull_request", pr_number=7,
                 state="succeeded", idempotency_key="pr-7")
        session.add(pr)
        session.flush()
        session.add(_measure(pr, ours, 9e-4))
        session.add_all([
            Change(phase="confirmed", repository_id=repository.id, benchmark_id=ours.id, suite="benchmarks", kind="perf-regression",
                   first_bad_commit_id=commits[REGRESSION_AT].id, change_pct=20.0, ci_low=18.0, ci_high=22.0),
            Change(phase="confirmed", repository_id=repository.id, benchmark_id=ours.id, suite="benchmarks", kind="perf-improvement",
                   first_bad_commit_id=commits[IMPROVEMENT_AT].id, change_pct=-5.0, state="expected"),
            # Sightings the confirmation rejected or has not decided: never shown on a page.
            Change(phase="rejected", repository_id=repository.id, benchmark_id=ours.id, suite="benchmarks",
                   kind="perf-regression", first_bad_commit_id=commits[REGRESSION_AT + 1].id),
            Change(phase="candidate", repository_id=repository.id, benchmark_id=ours.id, suite="benchmarks",
                   kind="perf-regression", first_bad_commit_id=commits[REGRESSION_AT + 2].id),
        ])
        session.flush()
        latest.rebuild(session)  # what ingest keeps as it stores runs, for rows added through the ORM
        session.commit()
    engine.dispose()


@pytest.fixture
def synthetic_app(database_url: str, tmp_path, monkeypatch) -> Iterator[Any]:  # type: ignore[no-untyped-def]
    if database_url.startswith("postgresql"):
        downgrade(database_url, "base")  # the session's PostgreSQL database is shared between tests
    migrate(database_url)
    seed_synthetic(database_url)
    monkeypatch.setenv("ROOFWATCH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ROOFWATCH_DATABASE_URL", database_url)
    _reset_caches()
    from roofwatch.service.api.app import create_app

    yield create_app()
    _reset_caches()


def _benchmark_id(client: TestClient, name: str, device: str, impl: str = "") -> int:
    rows = client.get("/api/benchmarks").json()
    return int(next(b["id"] for b in rows if b["name"] == name and b["device_class"] == device
                    and b["impl"] == impl))


# --- pure functions ------------------------------------------------------------------------------

def test_sparkline_is_plain_svg_scaled_to_its_box() -> None:
    svg = sparkline_svg([3.0, None, 1.0, 2.0], width=100, height=20)
    assert svg.startswith('<svg class="spark"') and svg.endswith("</svg>") and "<script" not in svg
    points = re.search(r'points="([^"]+)"', svg)
    assert points
    coords = [tuple(map(float, pair.split(","))) for pair in points.group(1).split()]
    assert len(coords) == 3  # the gap is skipped
    assert coords[0] == (2.0, 2.0) and coords[1][1] == 18.0  # highest at the top, lowest at the bottom
    assert all(2.0 <= x <= 98.0 and 2.0 <= y <= 18.0 for x, y in coords)
    assert 'aria-label="0 points"' in sparkline_svg([])
    flat = sparkline_svg([5.0, 5.0])
    assert "NaN" not in flat and "inf" not in flat


def test_decimation_caps_points_and_keeps_change_points_and_extremes() -> None:
    values: list[float | None] = [1.0 + 0.001 * (i % 7) for i in range(10_000)]
    values[4321] = 50.0  # a spike that must survive
    values[7000] = None
    keep = [1234, 5678, 9001]
    shown = decimate(values, keep, max_points=1_500)
    assert len(shown) <= 1_500 and len(shown) > 1_000
    assert shown == sorted(set(shown))
    assert {0, 9_999, 4321, *keep} <= set(shown)
    assert 7000 not in shown
    assert decimate(values[:100], keep=[3], max_points=1_500) == list(range(100))


def test_trend_and_units() -> None:
    assert trend_pct([1.0] * 10 + [1.1]) == pytest.approx(10.0)
    assert trend_pct([5.0] * 30 + [1.0] * 10 + [1.0]) == pytest.approx(0.0)  # only the 10 before count
    assert trend_pct([1.0]) is None

    # Coloured only beyond max(5 %, 4 × noise) with five earlier values, or for a detected change.
    # Far beyond noise without a confirmed change: bold, never red or green.
    assert trend_view(-30.0, 2.0, 10, higher_better=True).css == "unconfirmed"
    assert trend_view(30.0, 2.0, 10, higher_better=False).css == "unconfirmed"
    assert trend_view(30.0, 2.0, 10, higher_better=True).css == "unconfirmed"
    assert "not confirmed yet" in trend_view(30.0, 2.0, 10, higher_better=True).why
    assert trend_view(-17.0, 5.0, 10, higher_better=True).css == "muted"  # a ±17 % move in a ±5 % series
    assert "±5.0%" in trend_view(-17.0, 5.0, 10, higher_better=True).why
    assert trend_view(4.0, 0.1, 10, higher_better=False).css == "muted"  # under the 5 % floor
    assert trend_view(-30.0, 2.0, 3, higher_better=True).css == "muted"  # too little history
    assert trend_view(-30.0, None, 10, higher_better=True).css == "muted"
    assert trend_view(-6.0, 5.0, 10, higher_better=True, detected="perf-regression").css == "dir-regression"
    assert trend_view(-6.0, 5.0, 10, higher_better=False, detected="perf-improvement").css == "dir-improvement"
    assert trend_view(0.0, 5.0, 10, higher_better=True, detected="perf-regression").css == "muted"  # step left the window's median
    assert trend_view(6.0, 5.0, 10, higher_better=True, detected="perf-regression").css == "muted"  # moved the other way
    assert trend_view(None, 5.0, 10, higher_better=True).css == "muted"
    assert noise_pct([1.0, 1.02, 0.98, 1.0, 1.01, 0.99, 5.0]) == pytest.approx(1.4826, rel=1e-3)  # latest excluded
    assert noise_pct([1.0, 2.0]) is None
    assert human("bytes", 3.2e12) == "3.2 TB/s" and human("time", 1.5e-5) == "15 µs"
    memory_bound = Benchmark(fingerprint="x", repository_id=1, suite="s", name="n", device_class="d",
                             flops=1e6, bytes=1e6)
    assert kind_of(memory_bound) == "bytes"


# --- overview ------------------------------------------------------------------------------------

def test_overview_has_a_row_with_a_sparkline_per_benchmark(seeded_app) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(seeded_app)
    page = client.get("/")
    assert page.status_code == 200
    rows = table_rows(page.text, "benchmarks")
    assert len(rows) == 2
    assert all('<svg class="spark"' in row for row in rows)
    # Three commits measured: each sparkline has three vertices.
    assert [spark_vertices(row) for row in rows] == [3, 3]
    busy = next(row for row in rows if "test_busy" in row)
    assert "MB/s" in busy or "GB/s" in busy  # declared bytes, memory-bound: read as bandwidth
    assert re.search(r'href="/benchmarks/\d+"', busy)
    assert len(table_rows(page.text, "repositories")) == 1 and "acme/kernels" in page.text
    assert 'id="runs"' in page.text and 'href="/runs/' in page.text


def test_overview_filters_narrow_rows_and_survive_in_links(seeded_app) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(seeded_app)
    page = client.get("/", params={"repo": "acme/kernels", "kernel": "saxpy"})
    rows = table_rows(page.text, "benchmarks")
    assert len(rows) == 1 and "test_saxpy" in rows[0]
    assert re.search(r'href="/benchmarks/\d+\?repo=acme%2Fkernels&amp;kernel=saxpy"', rows[0])
    assert "No benchmark matches" in client.get("/", params={"dtype": "int4"}).text
    assert client.get("/", params={"repo": "nobody/nothing"}).status_code == 200


def test_overview_paginates_and_keeps_filters_on_page_links(seeded_app) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(seeded_app)
    first = client.get("/", params={"repo": "acme/kernels", "per_page": 1})
    assert len(table_rows(first.text, "benchmarks")) == 1 and "page 1 of 2" in first.text
    next_link = re.search(r'<a rel="next" href="([^"]+)"', first.text)
    assert next_link
    href = next_link.group(1).replace("&amp;", "&")
    assert "repo=acme%2Fkernels" in href and "page=2" in href and "per_page=1" in href
    second = client.get("/" + href)
    rows_1, rows_2 = table_rows(first.text, "benchmarks"), table_rows(second.text, "benchmarks")
    assert len(rows_2) == 1 and rows_1 != rows_2
    assert 'rel="prev"' in second.text and 'rel="next"' not in second.text


def test_overview_rejects_bad_params_with_422(seeded_app) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(seeded_app)
    assert client.get("/", params={"page": 0}).status_code == 422
    assert client.get("/", params={"page": "two"}).status_code == 422
    assert client.get("/", params={"per_page": 10_000}).status_code == 422
    assert client.get("/", params={"kernel": "x" * 500}).status_code == 422
    assert client.get("/", params={"page": 50}).status_code == 200  # past the end: empty, not an error


def test_overview_trend_repositories_and_changes(synthetic_app) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(synthetic_app)
    page = client.get("/", params={"device": H200})
    rows = table_rows(page.text, "benchmarks")
    assert len(rows) == 3  # softmax kernel + torch baseline + matmul, not the A100 row
    ours = next(row for row in rows if "test_softmax[triton-4096]" in row)
    # The last 30 points, the pull request's far-off measurement left out.
    assert spark_vertices(ours) == 30
    assert ">kernel<" in ours and "GB/s" in ours
    repositories = table_rows(page.text, "repositories")
    assert len(repositories) == 1 and sha(COMMITS - 1)[:12] in repositories[0]
    assert "no open change at this commit" in repositories[0] and ">1</a>" in repositories[0]
    changes = table_rows(page.text, "changes")
    assert len(changes) == 1 and "perf-regression" in changes[0] and 'href="/changes' in changes[0]


def _slow_down_latest(benchmark_id: int, factor: float) -> None:
    from roofwatch.service.core.db import get_engine

    with Session(get_engine()) as session:
        last = session.exec(select(Measurement).join(Run).where(
            Measurement.benchmark_id == benchmark_id, Run.trigger == "push").order_by(col(Run.id).desc())).first()
        assert last is not None
        last.median *= factor
        session.add(last)
        session.commit()


def _softmax_row(client: TestClient, impl: str) -> str:
    return next(r for r in table_rows(client.get("/", params={"kernel": "softmax", "device": H200}).text,
                                      "benchmarks") if f"[{impl}-" in r)


def test_overview_trend_is_grey_within_noise_and_bold_but_uncoloured_far_beyond_it(synthetic_app) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(synthetic_app)
    torch = _benchmark_id(client, "test_softmax[torch-4096]", H200, impl="torch")  # a series without any change
    row = _softmax_row(client, "torch")  # the synthetic history's own wobble: grey, with the series' noise beside it
    assert 'class="muted trend"' in row and 'class="noise">±' in row and "within noise" in row
    _slow_down_latest(torch, 1.03)  # 3 % slower: under the floor, still grey
    assert 'class="muted trend"' in _softmax_row(client, "torch")
    _slow_down_latest(torch, 1.25 / 1.03)  # the latest commit 25 % slower, unconfirmed but far beyond noise
    row = _softmax_row(client, "torch")
    assert 'class="unconfirmed trend"' in row and ">-20.0%" in row and "not confirmed yet" in row
    assert 'class="noise"' not in row


def test_overview_trend_of_a_confirmed_change_is_coloured_as_that_change(synthetic_app) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(synthetic_app)
    triton = _benchmark_id(client, "test_softmax[triton-4096]", H200)  # its confirmed regression is in the window
    assert 'class="muted trend"' in _softmax_row(client, "triton")  # the latest is level with the window's median
    _slow_down_latest(triton, 1.03)  # small, but in the direction of the confirmed change
    row = _softmax_row(client, "triton")
    assert 'class="dir-regression trend"' in row and "a confirmed perf-regression" in row


def test_recent_points_match_the_full_series(synthetic_app) -> None:  # type: ignore[no-untyped-def]
    from roofwatch.dashboard import reads as dq
    from roofwatch.service.core.db import get_engine

    with Session(get_engine()) as session:
        ids = [b.id for b in session.exec(select(Benchmark).order_by(col(Benchmark.id))).all() if b.id is not None]
        full = dq.full_series(session, ids)
        for limit in (3, 30, 100):  # dense series from the newest runs; the sparse one and short histories fall back
            recent = dq.recent_points(session, ids, limit)
            for benchmark_id in ids:
                expected = [(p["run_id"], p["median"]) for p in full[benchmark_id][-limit:]]
                assert [(p["run_id"], p["median"]) for p in recent[benchmark_id]] == expected
        assert len(full[ids[-1]]) == COMMITS // 10 and len(full[ids[0]]) == COMMITS  # pull request left out


# --- benchmark page ------------------------------------------------------------------------------

def test_benchmark_page_over_the_seeded_history(seeded_app) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(seeded_app)
    busy = _benchmark_id(client, "test_busy", client.get("/api/benchmarks").json()[0]["device_class"])
    page = client.get(f"/benchmarks/{busy}", params={"repo": "acme/kernels"})
    assert page.status_code == 200
    assert 'src="/static/plotly.min.js"' in page.text and "cdn" not in page.text.lower()
    figure = figure_of(page.text)
    main = figure["data"][0]
    assert main["type"] == "scatter" and len(main["x"]) == len(main["y"]) == 3
    assert all(isinstance(run, int) for run in main["customdata"])
    assert "<br>Kernel Dev &lt;dev@example.com&gt;<br>" in main["hovertext"][0]  # kept as text, not markup
    assert len(figure["data"]) == 1  # no device peaks on this host: no % of roofline to draw
    assert 'href="/?repo=acme%2Fkernels"' in page.text  # back to the filtered overview
    assert "3 drawn of 3 measured" in page.text


def test_benchmark_page_devices_changes_and_baselines(synthetic_app) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(synthetic_app)
    softmax = _benchmark_id(client, "test_softmax[triton-4096]", H200)
    page = client.get(f"/benchmarks/{softmax}")
    assert page.status_code == 200
    figure = figure_of(page.text)
    top = [t for t in figure["data"] if t.get("yaxis", "y") == "y" and t["name"] != "detected changes"]
    assert sorted(t["name"] for t in top) == [f"kernel · {A100}", f"kernel · {H200}"]  # one per device class
    assert all(len(t["y"]) == COMMITS for t in top)  # the pull-request run is not on the trend
    roofline = [t for t in figure["data"] if t.get("yaxis") == "y2"]
    assert len(roofline) == 2 and all(0 < y < 100 for t in roofline for y in t["y"])  # second panel, in %
    assert figure["layout"]["xaxis"]["matches"] == "x2"  # one commit axis for both panels
    marks = next(t for t in figure["data"] if t["name"] == "detected changes")
    assert sorted(marks["x"]) == [IMPROVEMENT_AT, REGRESSION_AT]
    lines = {shape["x0"]: shape["line"]["dash"] for shape in figure["layout"]["shapes"]}
    assert lines == {REGRESSION_AT: "dash", IMPROVEMENT_AT: "dot"}  # triaged drawn differently
    labels = [a["text"] for a in figure["layout"]["annotations"]]
    assert any("perf-improvement" in text and "expected" in text for text in labels)
    assert len(table_rows(page.text, "series-changes")) == 2  # confirmed ones only: no candidate, no rejected

    toggle = re.search(r'<a href="(/benchmarks/\d+\?impl=torch)">\+ torch</a>', page.text)
    assert toggle, "a link adds the torch baseline"
    with_torch = figure_of(client.get(toggle.group(1)).text)
    baselines = [t for t in with_torch["data"] if t["name"] == f"torch · {H200}"]
    assert len(baselines) == 1 and baselines[0]["line"]["dash"] == "dash" and len(baselines[0]["y"]) == COMMITS
    assert len(with_torch["data"]) == len(figure["data"]) + 2  # its throughput and its % of roofline
    unknown = figure_of(client.get(f"/benchmarks/{softmax}", params={"impl": "cuDNN"}).text)
    assert len(unknown["data"]) == len(figure["data"])


def test_benchmark_page_404_and_422(synthetic_app) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(synthetic_app)
    assert client.get("/benchmarks/999999").status_code == 404
    assert client.get("/benchmarks/not-a-number").status_code == 422
    softmax = _benchmark_id(client, "test_softmax[triton-4096]", H200)
    assert client.get(f"/benchmarks/{softmax}", params={"device": "x" * 500}).status_code == 422


def test_long_series_is_decimated_keeping_changes(synthetic_app, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import roofwatch.dashboard.figures as figures

    monkeypatch.setattr(figures, "MAX_POINTS", 12)  # 40 commits become "long"
    monkeypatch.setattr(figures, "WEBGL_ABOVE", 5)
    client = TestClient(synthetic_app)
    softmax = _benchmark_id(client, "test_softmax[triton-4096]", H200)
    page = client.get(f"/benchmarks/{softmax}")
    main = next(t for t in figure_of(page.text)["data"] if t["name"] == f"kernel · {H200}")
    assert len(main["x"]) <= 12 and {0, IMPROVEMENT_AT, REGRESSION_AT, COMMITS - 1} <= set(main["x"])
    assert main["type"] == "scattergl"
    assert f"{len(main['x'])} drawn of {COMMITS} measured" in page.text


def _main_trace(page: str) -> dict[str, Any]:
    return next(t for t in figure_of(page)["data"] if t["name"] == f"kernel · {H200}")


def _marked(page: str) -> list[int]:
    marks = [t for t in figure_of(page)["data"] if t["name"] == "detected changes"]
    return sorted(marks[0]["x"]) if marks else []


def test_benchmark_chart_shows_a_window_of_history_with_links_to_more(synthetic_app, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import roofwatch.dashboard.series_window as series_window

    monkeypatch.setattr(series_window, "DEFAULT_COMMITS", 15)
    client = TestClient(synthetic_app)
    softmax = _benchmark_id(client, "test_softmax[triton-4096]", H200)
    page = client.get(f"/benchmarks/{softmax}").text
    # The newest 15 commits (positions 26–40): the regression (index 30, position 31) is marked on
    # them, the improvement (position 11) lies before the window; the table still lists both.
    main = _main_trace(page)
    assert len(main["x"]) == 15 and main["hovertext"][-1].startswith(f"<b>{sha(COMMITS - 1)[:12]}</b> commit 39")
    assert _marked(page) == [REGRESSION_AT - (COMMITS - 15)]
    assert len(table_rows(page, "series-changes")) == 2
    assert "commits 26–40 of 1–40" in page
    earlier = re.search(r'<a href="([^"]+)">load 15 earlier commits</a>', page)
    whole = re.search(r'<a href="([^"]+)">whole history \(40 commits\)</a>', page)
    assert earlier and whole and "newest 15 commits" not in page
    wider = client.get(earlier.group(1).replace("&amp;", "&")).text
    assert len(_main_trace(wider)["x"]) == 30 and "commits 11–40" in wider and "newest 15 commits" in wider
    everything = client.get(whole.group(1).replace("&amp;", "&")).text
    assert len(_main_trace(everything)["x"]) == COMMITS and _marked(everything) == [IMPROVEMENT_AT, REGRESSION_AT]
    assert "load 15 earlier" not in everything
    # A window in the middle: positions 5–12 hold the improvement (index 10, position 11).
    middle = client.get(f"/benchmarks/{softmax}", params={"from": 5, "to": 12}).text
    assert len(_main_trace(middle)["x"]) == 8 and _marked(middle) == [IMPROVEMENT_AT - 4]
    assert client.get(f"/benchmarks/{softmax}", params={"from": -1}).status_code == 422


def test_long_window_is_downsampled_keeping_every_change_marker(synthetic_app, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import roofwatch.dashboard.figures as figures

    monkeypatch.setattr(figures, "MAX_POINTS", 8)
    client = TestClient(synthetic_app)
    softmax = _benchmark_id(client, "test_softmax[triton-4096]", H200)
    page = client.get(f"/benchmarks/{softmax}", params={"from": 0}).text
    main = _main_trace(page)
    assert len(main["x"]) <= 8 and {IMPROVEMENT_AT, REGRESSION_AT} <= set(main["x"])
    assert _marked(page) == [IMPROVEMENT_AT, REGRESSION_AT]
    # Every drawn point has its commit's title in its hover, read for the drawn points only.
    assert all(" commit " in text for text in main["hovertext"])


def _walk(client: TestClient, benchmark_id: int, limit: int) -> list[list[dict[str, Any]]]:
    pages, url = [], f"/api/benchmarks/{benchmark_id}/series?limit={limit}"
    while url:
        body = client.get(url).json()
        pages.append(body["points"])
        url = body["next"]
        assert (url is None) == (body["next_before"] is None)
    return pages


def test_series_api_pages_back_by_commit_position_and_exports_everything(synthetic_app) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(synthetic_app)
    softmax = _benchmark_id(client, "test_softmax[triton-4096]", H200)
    everything = client.get(f"/api/benchmarks/{softmax}/series", params={"limit": 10_000}).json()
    # The branch's series, as its chart draws it: the pull request's head measured at the last commit is no point of it.
    assert everything["next"] is None and len(everything["points"]) == COMMITS
    for benchmark_id, limit in ((softmax, 7), (softmax, 1), (_benchmark_id(client, "test_sparse", A100), 2)):
        full = client.get(f"/api/benchmarks/{benchmark_id}/series", params={"limit": 10_000}).json()["points"]
        pages = _walk(client, benchmark_id, limit)
        assert [p for page in reversed(pages) for p in page] == full  # each point once, in branch order
        positions = [{p["position"] for p in page} for page in pages]
        # Newest page first; a commit is never split across pages, even when it holds more than a page.
        assert all(min(newer) > max(older) for newer, older in zip(positions, positions[1:]))
        assert all(len(page) <= limit or len(positions[i]) == 1 for i, page in enumerate(pages))
    [at_head] = _walk(client, softmax, 1)[0]
    assert at_head["position"] == COMMITS and client.get(f"/api/runs/{at_head['run_id']}").json()["run"]["trigger"] == "push"

    export = client.get(f"/api/benchmarks/{softmax}/series.csv")
    assert export.headers["content-type"].startswith("text/csv")
    lines = export.text.strip().splitlines()
    assert lines[0].startswith("position,sha,run_id") and len(lines) == COMMITS + 1
    assert client.get("/api/benchmarks/999999/series.csv").status_code == 404
    assert client.get(f"/api/benchmarks/{softmax}/series", params={"limit": 0}).status_code == 422


def test_each_benchmark_says_what_an_ab_can_tell_at_its_noise(synthetic_app) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(synthetic_app)
    row = _softmax_row(client, "torch")
    detects = re.search(r'<td class="judgeable">≥ ([0-9.]+)%', row)
    assert detects and float(detects.group(1)) >= 2.0  # never below what counts
    torch = _benchmark_id(client, "test_softmax[torch-4096]", H200, impl="torch")
    page = client.get(f"/benchmarks/{torch}").text
    assert 'id="noise">run-to-run noise ±' in page and "an A/B of up to" in page


def test_a_benchmark_too_noisy_for_its_min_effect_is_named_as_such() -> None:
    from roofwatch.dashboard.metrics import judgeable

    quiet, noisy = judgeable(0.2, 10), judgeable(8.0, 10)
    assert quiet and quiet["ok"] and noisy and not noisy["ok"] and noisy["mde_pct"] > quiet["mde_pct"]
    assert judgeable(None, 10) is None
