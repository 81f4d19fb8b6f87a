"""Roofline, changes and compare pages, server-side, over a small history written row by row.

The history (``views_db``) has three devices — one calibrated (measured roofs), one known only
from its datasheet, one with no roofs at all — five pushes measured on the calibrated one, a
pull-request run that must not count as "latest", changes in every triage state, and an A/B
comparison with per-round values. Figures are read back from the JSON the pages embed.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlmodel import Session
from support.browser import ARTIFACTS, page  # noqa: F401  (fixture: headless Chromium)
from support.environment import _reset_caches
from support.live_server import serving

from roofwatch.dashboard.distribution_chart import distribution_figure, time_scale
from roofwatch.dashboard.roofline_chart import (
    KernelPoint,
    fraction,
    hover,
    moved,
    ridge_points,
    roof_traces,
    roofline_figure,
)
from roofwatch.roofline import CacheRoof, Peaks
from roofwatch.service.core.db import make_engine, migrate
from roofwatch.service.core.models import (
    Benchmark,
    Change,
    Commit,
    Comparison,
    ComparisonResult,
    Device,
    Measurement,
    Repository,
    Run,
    SuiteExecution,
)
from roofwatch.service.records import latest

H200 = "NVIDIA H200"
A100 = "NVIDIA A100-SXM4-80GB"  # in the datasheet table
MYSTERY = "Mystery GPU 9000"  # in no table
MEASURED_PEAKS = {"fp32": 50e12, "bf16": 700e12, "fp16": 700e12}
MEASURED_BW = 4.0e12
PUSHES = 5
# softmax slows down at push 3; matmul speeds up at push 4; stale is last measured at push 2.
SOFTMAX_S = [100e-6, 100e-6, 100e-6, 130e-6, 130e-6]
MATMUL_S = [2e-3, 2e-3, 2e-3, 2e-3, 1.6e-3]
SHAS = ["abcd" + f"{i:x}" * 36 for i in range(10, 10 + PUSHES)]  # all share "abcd": an ambiguous prefix


def _add(session: Session, row: Any) -> Any:
    session.add(row)
    session.flush()
    return row


def _measure(session: Session, run: Run, benchmark: Benchmark, median: float) -> None:
    _add(session, Measurement(run_id=run.id, benchmark_id=benchmark.id, samples=[median] * 3, median=median,
                              iqr=0.0, min=median, mean=median, n=3, cv=0.0,
                              achieved_flops=(benchmark.flops or 0) / median))


def _benchmark(session: Session, repo: Repository, name: str, device_class: str, dtype: str, shape: str,
               flops: float | None, nbytes: float | None) -> Benchmark:
    return _add(session, Benchmark(fingerprint=f"{name}-{device_class}", repository_id=repo.id, suite="benchmarks",
                                   name=name, dtype=dtype, shape=shape, device_class=device_class, flops=flops,
                                   bytes=nbytes))


def _run(session: Session, repo: Repository, sha: str, device: Device, trigger: str = "push",
         position: int | None = None) -> Run:
    commit = _add(session, Commit(repository_id=repo.id, sha=sha, message=f"commit {sha[:6]}\n\nbody",
                                  committed_at=datetime(2026, 1, 1, tzinfo=UTC), position=position))
    return _add(session, Run(repository_id=repo.id, commit_id=commit.id, trigger=trigger, device_id=device.id,
                             state="succeeded", idempotency_key=f"{sha}:{trigger}"))


def _devices(session: Session) -> dict[str, Device]:
    return {
        H200: _add(session, Device(fingerprint="h200", device_class=H200, hostname="gpu-box-1",
                                   peak_bandwidth=MEASURED_BW, peak_flops=MEASURED_PEAKS, peaks_source="measured")),
        A100: _add(session, Device(fingerprint="a100", device_class=A100)),
        MYSTERY: _add(session, Device(fingerprint="mystery", device_class=MYSTERY)),
    }


def _history(session: Session) -> dict[str, Any]:
    repo = _add(session, Repository(full_name="acme/kernels", clone_url="/dev/null"))
    devices = _devices(session)
    for device_class in (A100, MYSTERY):  # measured first, so the H200 is the newest device
        other = _benchmark(session, repo, f"softmax_{device_class[:6]}", device_class, "fp16", "1024x1024", 4e6, 8e6)
        _measure(session, _run(session, repo, f"{device_class[:6].lower():0<40}", devices[device_class]), other, 5e-5)
    softmax = _benchmark(session, repo, "softmax", H200, "bf16", "4096x4096", 5 * 4096 * 4096, 4 * 4096 * 4096)
    matmul = _benchmark(session, repo, "matmul", H200, "bf16", "4096x4096x4096", 2 * 4096**3, 3 * 2 * 4096**2)
    stale = _benchmark(session, repo, "layernorm", H200, "fp32", "8192x1024", 8 * 8192 * 1024, 8 * 8192 * 1024)
    copy = _benchmark(session, repo, "copy", H200, "fp32", "1M", 0.0, 8e6)  # no FLOPs: not on a roofline
    runs = [_run(session, repo, sha, devices[H200], position=i) for i, sha in enumerate(SHAS)]
    for i, run in enumerate(runs):
        _measure(session, run, softmax, SOFTMAX_S[i])
        _measure(session, run, matmul, MATMUL_S[i])
        _measure(session, run, copy, 1e-5)
        if i <= 2:
            _measure(session, run, stale, 50e-6)
    pr = _run(session, repo, "f" * 40, devices[H200], trigger="pull_request")
    _measure(session, pr, softmax, 10e-6)  # a PR head is not the branch: never "latest"
    # Its benchmark suite failed, printing the table pytest-benchmark prints; the run says git's three lines.
    pr.error = GIT_ERROR
    _add(session, SuiteExecution(run_id=pr.id, name="benchmarks", kind="benchmark", status="failed",
                                 reason="1 test(s) failed", exit_code=1, output_tail=BENCHMARK_TABLE_ERROR))
    changes = _changes(session, repo, softmax, matmul, runs)
    comparison = _comparison(session, repo, runs, devices[H200], softmax, matmul, stale)
    latest.rebuild(session)  # what ingest keeps as it stores runs, for rows added through the ORM
    return {"runs": [r.id for r in runs], "pr_run": pr.id, "shas": SHAS,
            "softmax": softmax.id, "matmul": matmul.id, "stale": stale.id, "copy": copy.id,
            "changes": changes, "comparison": comparison}


def _changes(session: Session, repo: Repository, softmax: Benchmark, matmul: Benchmark,
             runs: list[Run]) -> dict[str, int]:
    history = [{"from": "new", "to": "acknowledged", "note": "looking </script> into it", "by": "api-token",
                "at": "2026-01-02T10:00:00+00:00"}]
    rows = {
        "regression": Change(phase="confirmed", repository_id=repo.id, benchmark_id=softmax.id, suite="benchmarks", kind="perf-regression",
                             first_bad_commit_id=runs[3].commit_id, change_pct=30.0, ci_low=25.0, ci_high=35.0,
                             p_value=0.001, detected_run_id=runs[3].id),
        "improvement": Change(phase="confirmed", repository_id=repo.id, benchmark_id=matmul.id, suite="benchmarks",
                              kind="perf-improvement", first_bad_commit_id=runs[4].commit_id, change_pct=-20.0,
                              ci_low=-24.0, ci_high=-16.0, p_value=0.01, state="acknowledged",
                              details={"triage": history}, detected_run_id=runs[4].id),
        # One bug failing three parametrizations of test_softmax_rows: one change.
        "failure": Change(phase="confirmed", repository_id=repo.id, suite="correctness", test_id="test_softmax_rows", state="fixed",
                          kind="correctness-failure", range_start_sha="a" * 40, range_end_sha="b" * 40,
                          details={"tests": [f"test_softmax_rows[{n}-bf16]" for n in (1024, 4096, 8192)],
                                   "message": "AssertionError: rows do not sum to 1\nassert 0.97 == 1.0"}),
        "drift": Change(phase="confirmed", repository_id=repo.id, suite="correctness", test_id="test_bf16_drift", state="expected",
                        kind="numerics-drift"),
    }
    return {name: _add(session, row).id for name, row in rows.items()}


GIT_ERROR = ("could not check out: git worktree add failed: Preparing worktree (detached HEAD 1b3c95a)\n"
             "error: unable to read sha1 file of kernel.py (153e9e27618234ca77935df78a69f95b7beef283)\n"
             "fatal: Could not reset index file to revision 'HEAD'.")

# A suite that did not finish, with the pytest-benchmark table it printed last: a table, line for line.
BENCHMARK_TABLE_ERROR = """suites did not finish: benchmarks
head benchmarks: failed: 1 test(s) failed
---------------------- benchmark: 2 tests ----------------------
Name (time in us)        Min       Max      Mean    StdDev
----------------------------------------------------------------
test_softmax          100.10    131.20    112.40      9.80
test_matmul          2001.00   2010.00   2004.00      3.10
----------------------------------------------------------------"""

ROUNDS = {"softmax": ([100, 101, 99, 100, 102], [130, 129, 131, 130, 132], "regression"),
          "matmul": ([2000, 2010, 1990, 2005, 1995], [2001, 2008, 1992, 2004, 1996], "no-change"),
          "layernorm": ([50, 60, 45, 55, 52, 48, 58], [52, 49, 61, 50, 57, 47, 53], "inconclusive")}
WHY = {"softmax": {"cause": "kernels", "why": "kernel _softmax_fwd: num_warps 4 → 8",
                   "kernels": ["_softmax_fwd: num_warps 4 → 8"]}}


def _comparison(session: Session, repo: Repository, runs: list[Run], device: Device,
                *benchmarks: Benchmark) -> int:
    comparison = _add(session, Comparison(repository_id=repo.id, base_commit_id=runs[2].commit_id,
                                          head_commit_id=runs[3].commit_id, device_id=device.id, state="succeeded",
                                          verdict="regression", rounds=7, idempotency_key="ab-1",
                                          error=BENCHMARK_TABLE_ERROR, details={
                                              "confidence": 0.99, "adjusted_confidence": {"benchmarks::softmax": 0.9967},
                                              "new_failures": [{"suite": "correctness", "test_id": "test_rows",
                                                                "message": "assert 0.97 == 1.0",
                                                                "tests": [f"test_rows[{n}]" for n in range(11)]}]}))
    for benchmark in benchmarks:
        base, head, direction = ROUNDS[benchmark.name]
        _add(session, ComparisonResult(
            comparison_id=comparison.id, benchmark_id=benchmark.id, base_values=[v * 1e-6 for v in base],
            head_values=[v * 1e-6 for v in head], base_median=sorted(base)[len(base) // 2] * 1e-6,
            head_median=sorted(head)[len(head) // 2] * 1e-6, direction=direction,
            change_pct=100 * (sum(head) / sum(base) - 1), ci_low=-1.0, ci_high=1.0,
            attribution=WHY.get(benchmark.name, {})))
    return int(comparison.id)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def views_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('views') / 'roofwatch.db'}"
    migrate(url)
    engine = make_engine(url)
    with Session(engine) as session:
        ids = _history(session)
        session.commit()
    engine.dispose()
    return url, ids


@pytest.fixture
def client(views_db: tuple[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch,
           tmp_path: Path) -> Iterator[TestClient]:
    monkeypatch.setenv("ROOFWATCH_DATABASE_URL", views_db[0])
    monkeypatch.setenv("ROOFWATCH_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("ROOFWATCH_API_TOKEN", raising=False)
    _reset_caches()
    from roofwatch.service.api.app import create_app

    app: FastAPI = create_app()
    yield TestClient(app)
    _reset_caches()


@pytest.fixture
def ids(views_db: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return views_db[1]


def _embedded(html: str, element_id: str = "figure") -> dict[str, Any]:
    match = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', html, re.S)
    assert match, f"no embedded #{element_id}"
    return json.loads(match.group(1))  # type: ignore[no-any-return]


def _traces(figure: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return [t for t in figure["data"] if t.get("meta") == role]


# --- the roofline page ---------------------------------------------------------------------------


def test_roofline_defaults_to_the_newest_device_with_its_measured_roofs(client: TestClient,
                                                                         ids: dict[str, Any]) -> None:
    response = client.get("/roofline")
    assert response.status_code == 200
    assert f"Roofline · {H200}" in response.text and 'id="roof-source" class="roof-measured"' in response.text
    assert 'src="/static/plotly.min.js"' in response.text and "cdn" not in response.text.lower()
    figure = _embedded(response.text)
    roofs = _traces(figure, "roof")
    # The bandwidth slope, and one flat roof per distinct peak: fp16 and bf16 share theirs.
    assert [t["name"] for t in roofs] == ["memory bandwidth (measured)", "fp32 roof (measured)",
                                          "bf16/fp16 roof (measured)"]
    assert roofs[1]["y"] == [50e12, 50e12] and roofs[2]["y"] == [700e12, 700e12]
    assert _traces(figure, "ridge")[0]["x"] == pytest.approx([50e12 / MEASURED_BW, 700e12 / MEASURED_BW])
    latest = {bid: (x, y) for t in _traces(figure, "latest") for bid, x, y in zip(t["customdata"], t["x"], t["y"])}
    # softmax, matmul and the stale layernorm; the copy (no FLOPs) is left out and counted.
    assert set(latest) == {ids["softmax"], ids["matmul"], ids["stale"]}
    assert "1 benchmark(s) declare no FLOPs or no bytes" in response.text
    # Latest means the newest push, not the faster pull-request run.
    assert latest[ids["softmax"]] == pytest.approx((5 / 4, 5 * 4096 * 4096 / SOFTMAX_S[-1]))
    hover = next(t for t in _traces(figure, "latest") if ids["softmax"] in t["customdata"])["hovertext"][0]
    expected_pct = 100 * (5 * 4096 * 4096 / SOFTMAX_S[-1]) / (5 / 4 * MEASURED_BW)
    assert "softmax" in hover and "4096x4096" in hover and "bf16" in hover and f"{expected_pct:.1f}% of roofline" in hover


def test_roofline_default_comparison_goes_back_runs_and_draws_arrows(client: TestClient,
                                                                     ids: dict[str, Any]) -> None:
    figure = _embedded(client.get("/roofline", params={"back": 2}).text)
    earlier = _traces(figure, "earlier")[0]
    # Two pushes back is push 3 (index 2): softmax and matmul moved since; layernorm was not re-measured.
    assert sorted(earlier["customdata"]) == sorted([ids["softmax"], ids["matmul"]])
    assert earlier["y"][earlier["customdata"].index(ids["softmax"])] == pytest.approx(5 * 4096 * 4096 / SOFTMAX_S[2])
    shift = _traces(figure, "shift")[0]
    assert shift["x"].count(None) == 2 and shift["marker"]["symbol"] == "arrow"


def _move_cells(text: str) -> dict[str, str]:
    """Benchmark name → the CSS class of its Δ-time cell in the roofline page's moves table."""
    table = text.split('id="moves"', 1)[1].split("</table>", 1)[0]
    return {m.group(1): m.group(2) for m in re.finditer(
        r"<code>(\w+)</code>.*?<td class=\"([\w-]+)\"\s+title=", table, flags=re.S)}


def test_roofline_moves_are_coloured_only_for_confirmed_changes_between_the_runs(client: TestClient) -> None:
    # Push 2 → 4: softmax's confirmed regression (push 3) and matmul's improvement (push 4) lie between.
    assert _move_cells(client.get("/roofline", params={"back": 2}).text) == {
        "softmax": "dir-regression", "matmul": "dir-improvement"}
    # Push 3 → 4: softmax moved again, but its change is not in between, so the move is grey.
    assert _move_cells(client.get("/roofline", params={"back": 1}).text) == {
        "softmax": "muted", "matmul": "dir-improvement"}


def test_roofline_against_a_sha_prefix_or_a_run_id(client: TestClient, ids: dict[str, Any]) -> None:
    by_sha = client.get("/roofline", params={"against": ids["shas"][3][:7]})
    assert by_sha.status_code == 200 and f"run #{ids['runs'][3]}</a>):" in by_sha.text
    # Push 4 → 5: both re-measured; matmul got faster, softmax stayed put (a zero-length arrow).
    earlier = _traces(_embedded(by_sha.text), "earlier")[0]
    assert earlier["customdata"] == [ids["softmax"], ids["matmul"]]
    assert earlier["y"] == pytest.approx([5 * 4096 * 4096 / SOFTMAX_S[3], 2 * 4096**3 / MATMUL_S[3]])
    by_run = client.get("/roofline", params={"against": str(ids["runs"][0])})
    # Everything moved since push 1, layernorm too (its newest is push 3).
    assert len(_traces(_embedded(by_run.text), "earlier")[0]["customdata"]) == 3
    assert 'id="moves"' in by_run.text and "+30.0%" in by_run.text  # softmax: 100 µs → 130 µs
    latest = client.get("/roofline", params={"against": ids["shas"][-1][:10]})
    assert _traces(_embedded(latest.text), "earlier") == []  # nothing moved since itself


def test_roofline_bad_and_unknown_against(client: TestClient, ids: dict[str, Any]) -> None:
    assert client.get("/roofline", params={"against": "not-hex!"}).status_code == 422
    assert client.get("/roofline", params={"against": "0" * 41}).status_code == 422
    assert client.get("/roofline", params={"back": 0}).status_code == 422
    assert client.get("/roofline", params={"back": "many"}).status_code == 422
    assert client.get("/roofline", params={"against": "deadbeef"}).status_code == 404
    assert client.get("/roofline", params={"against": "9" * 30}).status_code == 404  # no overflow, no 500
    # The pull-request run is not on the branch, so it is no comparison point either.
    assert client.get("/roofline", params={"against": str(ids["pr_run"])}).status_code == 404
    ambiguous = client.get("/roofline", params={"against": "abcd"})
    assert ambiguous.status_code == 422 and "several commits" in ambiguous.text
    assert client.get("/roofline", params={"against": SHAS[0][:6], "device": A100}).status_code == 404


def test_roofline_datasheet_fallback_and_no_roofs_are_labelled(client: TestClient) -> None:
    datasheet = client.get("/roofline", params={"device": A100})
    assert datasheet.status_code == 200 and 'class="roof-datasheet"' in datasheet.text
    assert "Datasheet fallback" in datasheet.text
    roofs = _traces(_embedded(datasheet.text), "roof")
    assert roofs and all(t["name"].endswith("(datasheet)") and t["line"]["dash"] == "dash" for t in roofs)

    none = client.get("/roofline", params={"device": MYSTERY})
    assert none.status_code == 200 and 'class="roof-none"' in none.text
    assert "<code>roofwatch calibrate</code> measures them" in none.text
    figure = _embedded(none.text)
    assert _traces(figure, "roof") == [] and len(_traces(figure, "latest")[0]["x"]) == 1

    nothing = client.get("/roofline", params={"device": "No Such GPU"})
    assert nothing.status_code == 200 and 'class="roof-none"' in nothing.text
    assert _embedded(nothing.text)["data"] == []


def test_roofline_filters_narrow_the_points(client: TestClient, ids: dict[str, Any]) -> None:
    figure = _embedded(client.get("/roofline", params={"kernel": "soft", "dtype": "bf16"}).text)
    assert [bid for t in _traces(figure, "latest") for bid in t["customdata"]] == [ids["softmax"]]
    empty = client.get("/roofline", params={"repo": "nobody/nothing"})
    assert empty.status_code == 200 and "No measurements yet" in empty.text


# --- the changes page ----------------------------------------------------------------------------


def test_changes_lists_open_ones_first_with_actions(client: TestClient, ids: dict[str, Any]) -> None:
    response = client.get("/changes")
    assert response.status_code == 200
    listed = [int(i) for i in re.findall(r'data-change-id="(\d+)"', response.text)]
    changes = ids["changes"]
    assert listed == [changes["regression"], changes["improvement"], changes["drift"], changes["failure"]]
    row = response.text.split(f'id="change-{changes["regression"]}"')[1].split("</tr>")[0]
    assert f'href="/benchmarks/{ids["softmax"]}"' in row and f'href="/runs/{ids["runs"][3]}"' in row
    # Said in the metric softmax is plotted in (bandwidth: 1.25 FLOP/byte), with the line's sign:
    # its time +30 % [+25, +35] is bandwidth −23.1 % [−25.9, −20.0].
    assert "bandwidth −23.1 %" in row and "[−25.9, −20.0]" in row and "0.001" in row and ids["shas"][3][:12] in row
    assert re.findall(r'data-state="(\w+)"', row)[1:] == ["acknowledged", "expected", "invalid", "fixed", "new"]
    assert 'data-state="new" disabled' in row  # the current state is not offered again
    # The token lives in sessionStorage and is sent as a bearer header, never in a URL or a cookie.
    assert '<script src="/static/changes.js"' in response.text and 'name="token' not in response.text
    script = client.get("/static/changes.js").text
    assert "sessionStorage" in script and '"Authorization": "Bearer "' in script and "document.cookie" not in script
    assert 'id="writes-disabled"' in response.text  # no ROOFWATCH_API_TOKEN in this server's environment
    failure = response.text.split(f'id="change-{changes["failure"]}"')[1].split("</tr>")[0]
    assert "test_softmax_rows" in failure and "aaaaaaaa..bbbbbbbb" in failure and "/benchmarks/" not in failure
    # One change for the three parametrizations one bug failed: each named, the first one's failure below.
    assert "3 parametrizations fail" in failure
    assert re.findall(r"<code>\[([^\]]+)\]</code>", failure) == ["1024-bf16", "4096-bf16", "8192-bf16"]
    assert '<pre class="message">AssertionError: rows do not sum to 1\nassert 0.97 == 1.0</pre>' in failure


def test_changes_history_is_escaped_and_writes_enabled_with_a_token(client: TestClient, ids: dict[str, Any],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from roofwatch.service.core.config import get_settings

    monkeypatch.setenv("ROOFWATCH_API_TOKEN", "s3cret")
    get_settings.cache_clear()
    response = client.get("/changes", params={"state": "acknowledged"})
    assert 'id="writes-disabled"' not in response.text and "s3cret" not in response.text
    assert [int(i) for i in re.findall(r'data-change-id="(\d+)"', response.text)] == [ids["changes"]["improvement"]]
    assert "new → acknowledged: looking &lt;/script&gt; into it" in response.text


def test_changes_filters_and_bad_params(client: TestClient, ids: dict[str, Any]) -> None:
    def listed(**params: Any) -> list[int]:
        response = client.get("/changes", params=params)
        assert response.status_code == 200
        return [int(i) for i in re.findall(r'data-change-id="(\d+)"', response.text)]

    changes = ids["changes"]
    assert listed(state=["fixed", "expected"]) == [changes["drift"], changes["failure"]]
    assert listed(kind="perf-regression") == [changes["regression"]]
    assert listed(kind=["correctness-failure", "numerics-drift"], state="fixed") == [changes["failure"]]
    assert listed(kind="", repo="") == listed()  # the form's "all"
    assert listed(repo="nobody/nothing") == []
    assert listed(limit=1) == [changes["regression"]]
    # Pages of ``limit``: together they list every change once, in the order of the whole listing.
    everything = listed(limit=1000)
    paged = [i for number in range(1, len(everything) + 2) for i in listed(limit=2, page=number)]
    assert paged == everything and len(everything) >= 3
    second = client.get("/changes", params={"limit": 2, "page": 2, "kind": ""}).text
    assert 'id="page-earlier" href="/changes?limit=2&amp;kind=&amp;page=1"' in second
    assert client.get("/changes", params={"page": 0}).status_code == 422
    assert client.get("/changes", params={"state": "ignored"}).status_code == 422
    assert client.get("/changes", params={"kind": "slow"}).status_code == 422
    assert client.get("/changes", params={"limit": 0}).status_code == 422


# --- the compare page ----------------------------------------------------------------------------


def test_compare_charts_rounds_of_moved_and_inconclusive_benchmarks(client: TestClient,
                                                                    ids: dict[str, Any]) -> None:
    response = client.get(f"/compare/{ids['comparison']}")
    assert response.status_code == 200
    assert 'id="benchmarks"' in response.text and 'id="verdict"' in response.text  # linked from PR comments
    charted = {int(i) for i in re.findall(r'id="dist-(\d+)"', response.text)}
    assert charted == {ids["softmax"], ids["stale"]}  # the no-change matmul only on request
    for name, benchmark_id in (("softmax", ids["softmax"]), ("layernorm", ids["stale"])):
        figure = _embedded(response.text, f"dist-figure-{benchmark_id}")
        base, head, _ = ROUNDS[name]
        assert len(_traces(figure, "base")[0]["y"]) == len(base)
        assert len(_traces(figure, "head")[0]["y"]) == len(head)
        assert sum(t["x"].count(None) for t in _traces(figure, "pairs")) == len(base)
    table = response.text.split('<table id="benchmarks">', 1)[1].split("</table>", 1)[0]
    assert "kernel _softmax_fwd: num_warps 4 → 8" in table  # the change says why
    assert f'href="?show={ids["matmul"]}#dist-{ids["matmul"]}"' in response.text
    assert f'<option value="{ids["matmul"]}">' in response.text

    asked = client.get(f"/compare/{ids['comparison']}", params={"show": ids["matmul"]})
    assert f'id="dist-{ids["matmul"]}"' in asked.text
    matmul = _embedded(asked.text, f"dist-figure-{ids['matmul']}")
    assert _traces(matmul, "base")[0]["y"][0] == pytest.approx(2.0) and "ms" in matmul["layout"]["yaxis"]["title"]["text"]


def test_compare_lists_what_moved_and_a_few_others_unless_asked_for_all(client: TestClient, ids: dict[str, Any],
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from roofwatch.dashboard.pages import compare

    def listed(**params: Any) -> set[int]:
        text = client.get(f"/compare/{ids['comparison']}", params=params).text
        return {int(i) for i in re.findall(r'<tr id="row-(\d+)"', text)}

    everything = {ids["softmax"], ids["stale"], ids["matmul"]}
    assert listed() == everything  # three rows: nothing to fold
    monkeypatch.setattr(compare, "UNCHANGED_SHOWN", 0)
    assert listed() == {ids["softmax"], ids["stale"]}  # the moved and the inconclusive, never folded away
    folded = client.get(f"/compare/{ids['comparison']}").text
    assert 'id="list-all" href="?all=1">List all 3</a>' in folded
    assert listed(all=1) == everything


def test_compare_shows_the_pull_request_comment_rendered_from_its_markdown(client: TestClient,
                                                                           ids: dict[str, Any]) -> None:
    text = client.get(f"/compare/{ids['comparison']}").text
    comment = text.split('id="pr-comment">', 1)[1].split('<pre id="pr-comment-markdown"', 1)[0]
    # The Markdown became HTML: the verdict heading, the folded full table, benchmark names in code.
    assert "<h3>roofwatch:" in comment and "<details>" in comment and "<table>" in comment
    assert "<code>" in comment and "**" not in comment
    markdown = text.split('<pre id="pr-comment-markdown" hidden>', 1)[1].split("</pre>", 1)[0]
    assert "&lt;!-- roofwatch:pull-request-report --&gt;" in markdown  # the raw body, escaped in the page


def test_compare_keeps_a_suites_output_as_printed_and_groups_failures_by_test_function(
        client: TestClient, ids: dict[str, Any]) -> None:
    text = client.get(f"/compare/{ids['comparison']}").text
    # The pytest-benchmark table a failing suite printed stays a table: preformatted, its lines and columns kept.
    block = re.search(r'<pre class="output" id="comparison-error">(.*?)</pre>', text, re.S)
    assert block is not None and block.group(1) == BENCHMARK_TABLE_ERROR
    # Eleven failing parametrizations of one function: one entry, naming them, with the first one's output.
    section = text.split("New correctness failures (1)", 1)[1].split("<h2>", 1)[0]
    assert "<code>correctness::test_rows</code>" in section and "11 parametrizations fail" in section
    assert re.findall(r"<code>\[(\d+)\]</code>", section) == [str(n) for n in range(11)]
    assert "<pre>assert 0.97 == 1.0</pre>" in section


def test_a_run_page_keeps_gits_error_and_a_failed_suites_output_as_printed(client: TestClient,
                                                                         ids: dict[str, Any]) -> None:
    text = client.get(f"/runs/{ids['pr_run']}").text
    error = re.search(r'<pre class="output" id="run-error">(.*?)</pre>', text, re.S)
    assert error is not None and error.group(1) == GIT_ERROR.replace("'", "&#39;")
    tail = text.split('<tr class="suite-output">', 1)[1].split("</tr>", 1)[0]
    assert f'<pre class="output">{BENCHMARK_TABLE_ERROR}</pre>' in tail


def test_compare_labels_intervals_with_the_level_they_were_decided_at(client: TestClient, ids: dict[str, Any]) -> None:
    text = client.get(f"/compare/{ids['comparison']}").text
    assert "95 %" not in text
    assert re.search(r"<th[^>]*>99 % interval<sup>\*</sup></th>", text)
    row = text.split(f'<tr id="row-{ids["softmax"]}">', 1)[1].split("</tr>", 1)[0]
    assert '<sup title="at 99.6 %">*</sup>' in row  # the regression's interval: adjusted for the benchmarks
    assert "held at 99.6 %: the\n  99 % level adjusted" in text


def test_compare_unknown_ids_and_bad_params(client: TestClient, ids: dict[str, Any]) -> None:
    assert client.get("/compare/999999").status_code == 404
    assert client.get(f"/compare/{2**70}").status_code == 422
    assert client.get("/compare/abc").status_code == 422
    assert client.get(f"/compare/{ids['comparison']}", params={"show": "x"}).status_code == 422
    assert client.get(f"/compare/{ids['comparison']}", params={"show": ids["copy"]}).status_code == 404


# --- the pure figure builders --------------------------------------------------------------------


PEAKS = Peaks(bandwidth=2e12, flops={"fp32": 20e12, "fp16": 300e12, "bf16": 300e12}, source="measured")


def _point(bid: int, flops: float, nbytes: float, median: float, run_id: int = 2, dtype: str = "fp16") -> KernelPoint:
    return KernelPoint(bid, f"k{bid}", "64x64", dtype, "", flops, nbytes, median, run_id, "c" * 40)


def test_roofs_meet_the_slope_at_each_ridge_point() -> None:
    ridges = ridge_points(PEAKS)
    assert ridges == [("fp32", 10.0, 20e12), ("bf16/fp16", 150.0, 300e12)]
    slope, *flats, marks = roof_traces(PEAKS, 0.5, 1000.0)
    bandwidth = slope["y"][1] / slope["x"][1]
    assert bandwidth == pytest.approx(PEAKS.bandwidth) and slope["x"] == [0.5, 150.0]
    for (_, intensity, peak), flat in zip(ridges, flats):
        assert flat["x"][0] == intensity and flat["y"] == [peak, peak]
        assert intensity * bandwidth == pytest.approx(peak)  # the flat roof starts on the slope
        assert flat["x"][1] == 1000.0
    assert marks["meta"] == "ridge" and marks["x"] == [10.0, 150.0]


def test_fraction_is_held_to_the_roof_of_its_dtype() -> None:
    memory_bound = _point(1, 1e9, 1e9, 1e-3)  # AI 1: 1 TFLOP/s of a 2 TFLOP/s slope
    assert fraction(memory_bound, PEAKS) == pytest.approx(0.5)
    compute_bound = _point(2, 1e12, 1e9, 10.0, dtype="int8")  # no int8 roof: held to fp32's 20 TFLOP/s
    assert fraction(compute_bound, PEAKS) == pytest.approx(0.1 / 20)
    stored = KernelPoint(3, "k", "", "fp16", "", 1.0, 1.0, 1.0, 1, "c", stored_fraction=0.42)
    assert fraction(stored, None) == 0.42


def test_hierarchical_roofline_draws_cache_roofs_and_names_the_roof_of_each_point() -> None:
    peaks = replace(PEAKS, caches=(CacheRoof("L2", 50 << 20, 8e12),))
    in_dram = _point(1, 1e9, 1e9, 1e-3)  # 1 TB/s: under DRAM's 2 TB/s
    from_l2 = _point(2, 1e6, 1 << 20, (1 << 20) / 4e12)  # 4 TB/s: beats DRAM, so L2 served it
    figure = roofline_figure([in_dram, from_l2], [], peaks)
    [cache_roof] = [t for t in figure["data"] if t.get("meta") == "cache-roof"]
    assert cache_roof["name"] == "L2 bandwidth (measured)" and cache_roof["y"][0] == pytest.approx(cache_roof["x"][0] * 8e12)
    hovers = [h for t in figure["data"] if t.get("meta") == "latest" for h in t["hovertext"]]
    assert any("50.0% of roofline, bounded by the DRAM roof" in h for h in hovers)
    assert any("50.0% of roofline, bounded by the L2 roof" in h for h in hovers)
    too_fast = _point(3, 1e6, 1 << 20, (1 << 20) / 20e12)
    assert "faster than every roof" in hover(too_fast, peaks, "latest") and fraction(too_fast, peaks) > 1


def test_roofline_figure_arrows_only_for_benchmarks_measured_again() -> None:
    latest = [_point(1, 1e9, 1e9, 1e-3, run_id=5), _point(2, 1e9, 1e8, 1e-3, run_id=3)]
    earlier = [_point(1, 1e9, 1e9, 2e-3, run_id=2), _point(2, 1e9, 1e8, 1e-3, run_id=3)]
    assert [(b.run_id, a.run_id) for b, a in moved(latest, earlier)] == [(2, 5)]
    figure = roofline_figure(latest, earlier, None)
    assert _traces(figure, "roof") == [] and _traces(figure, "earlier")[0]["customdata"] == [1]
    assert _traces(figure, "shift")[0]["y"] == [5e11, 1e12, None]
    assert figure["layout"]["xaxis"]["type"] == "log" and figure["layout"]["yaxis"]["type"] == "log"
    assert roofline_figure([], [], None)["data"] == []


def test_distribution_figure_pairs_rounds_and_colours_by_direction() -> None:
    figure = distribution_figure([1e-3, 2e-3, 3e-3], [1.5e-3, 1.5e-3, 3e-3])
    assert _traces(figure, "base")[0]["y"] == pytest.approx([1.0, 2.0, 3.0])  # in ms
    assert "ms" in figure["layout"]["yaxis"]["title"]["text"]
    worse, better = _traces(figure, "pairs")
    assert worse["name"] == "head worse in round" and worse["y"] == pytest.approx([1.0, 1.5, None])
    assert better["x"] == ["base", "head", None, "base", "head", None]
    throughput = distribution_figure([10.0, 10.0], [12.0, 8.0], unit="GB/s", higher_is_better=True)
    worse, better = _traces(throughput, "pairs")
    assert worse["y"] == [10.0, 8.0, None] and better["y"] == [10.0, 12.0, None]
    assert time_scale([5e-8], "s") == (1e9, "ns") and time_scale([5.0], "GB/s") == (1.0, "GB/s")


# --- in a real browser: the charts draw, and the triage buttons work -------------------------------


@pytest.fixture
def live_server(views_db: tuple[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch,
                tmp_path: Path) -> Iterator[str]:
    """The dashboard on loopback over a copy of the history (triage writes to it), token ``s3cret``."""
    copy = tmp_path / "roofwatch.db"
    shutil.copy(views_db[0].removeprefix("sqlite:///"), copy)
    monkeypatch.setenv("ROOFWATCH_DATABASE_URL", f"sqlite:///{copy}")
    monkeypatch.setenv("ROOFWATCH_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ROOFWATCH_API_TOKEN", "s3cret")
    _reset_caches()
    from roofwatch.service.api.app import create_app

    with serving(create_app()) as url:
        yield url
    _reset_caches()


@pytest.mark.browser
def test_pages_draw_and_triage_from_the_browser(live_server: str, page, ids: dict[str, Any]) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    ARTIFACTS.mkdir(exist_ok=True)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(live_server + "/roofline?back=4")
    page.wait_for_selector("#roofline .main-svg")
    drawn = page.evaluate("() => document.getElementById('roofline').data.map(t => t.meta)")
    assert drawn.count("roof") == 3 and "shift" in drawn and "latest" in drawn
    page.screenshot(path=str(ARTIFACTS / "roofline.png"), full_page=True)

    # The benchmark chart marks every change of its series, one line each (one per panel with a roofline panel).
    page.goto(live_server + f"/benchmarks/{ids['softmax']}")
    page.wait_for_selector("#benchmark-chart .main-svg")
    listed = page.locator("#series-changes tr").count() - 1
    marked = page.evaluate("() => (document.getElementById('benchmark-chart').layout.shapes || []).length")
    assert listed > 0 and marked >= listed, (listed, marked)
    page.screenshot(path=str(ARTIFACTS / "benchmark-with-changes.png"), full_page=True)

    # A run leads to the comparison whose head it measured: run → compare, as a reader clicks.
    page.goto(live_server + f"/runs/{ids['runs'][3]}")
    page.locator(f"#comparisons a[href='/compare/{ids['comparison']}']").click()
    page.wait_for_url(f"**/compare/{ids['comparison']}")
    page.wait_for_selector(".dist-chart .main-svg")
    assert page.locator(".dist-chart.js-plotly-plot").count() == 2
    page.screenshot(path=str(ARTIFACTS / "compare.png"), full_page=True)

    page.goto(live_server + "/changes")
    row = page.locator(f"#change-{ids['changes']['regression']}")
    message = row.locator(".action-message")
    row.locator('button[data-state="acknowledged"]').click()
    assert "A token is needed" in message.inner_text()

    page.fill("#token-input", "nope")
    page.click("#token-save")
    row.locator('button[data-state="acknowledged"]').click()
    page.wait_for_function("el => el.textContent.includes('401')", arg=message.element_handle())

    page.fill("#token-input", "s3cret")
    page.press("#token-input", "Enter")
    row.locator("input.note").fill("bisecting")
    row.locator('button[data-state="acknowledged"]').click()
    page.wait_for_function("el => el.textContent === 'now acknowledged'", arg=message.element_handle())
    assert row.locator(".state-cell").inner_text() == "acknowledged"
    assert "new → acknowledged: bisecting" in row.locator("ol.history").inner_text()
    assert row.locator('button[data-state="acknowledged"]').is_disabled()
    # The token stays in this tab's session storage: not in the URL, not in a cookie.
    assert page.evaluate("() => sessionStorage.getItem('roofwatch.apiToken')") == "s3cret"
    assert "s3cret" not in page.url and page.evaluate("() => document.cookie") == ""
    page.screenshot(path=str(ARTIFACTS / "changes.png"), full_page=True)

    page.goto(live_server + "/changes?state=acknowledged")  # it is stored, not just drawn
    assert page.locator(f"#change-{ids['changes']['regression']}").count() == 1
    assert errors == []


def test_only_the_roofs_the_points_are_held_to_are_drawn_each_labelled_with_dtype_and_value() -> None:
    fp16_only = roofline_figure([_point(1, 1e9, 1e9, 1e-3, dtype="fp16")], [], PEAKS)
    [flat] = [t for t in _traces(fp16_only, "roof") if t["x"][0] > 0.5 and t["y"][0] == t["y"][1]]
    assert flat["text"] == ["", "bf16/fp16 300 TFLOP/s"] and flat["mode"] == "lines+text"
    both = roofline_figure([_point(1, 1e9, 1e9, 1e-3, dtype="fp16"), _point(2, 1e9, 1e9, 1e-3, dtype="int8")],
                           [], PEAKS)  # int8 has no roof: held to fp32's, which is then drawn too
    labels = sorted(t["text"][1] for t in _traces(both, "roof") if t.get("text"))
    assert labels == ["bf16/fp16 300 TFLOP/s", "fp32 20 TFLOP/s"]
