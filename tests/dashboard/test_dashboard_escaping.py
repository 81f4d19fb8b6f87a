"""Suite-controlled text stays text: JSON in script elements, every Plotly figure, the PR comment,
the templates, and every page rendered over a history whose strings are all markup."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from support.environment import _reset_caches
from support.hostile_history import (
    AUTHOR,
    IMPL,
    KERNEL,
    LINK,
    MESSAGE,
    NAMES,
    RAW_MARKUP,
    SHAPE,
    SPECIALIZATION,
    SUITE,
    TEST_ID,
    TITLE,
    build,
)

from roofwatch.dashboard.distribution_chart import distribution_figure
from roofwatch.dashboard.escaping import plotly_text, script_json
from roofwatch.dashboard.figures import Series, benchmark_figure
from roofwatch.dashboard.metrics import Metric
from roofwatch.dashboard.pages.compiled import history_figure
from roofwatch.dashboard.pr_comment import comment_html
from roofwatch.dashboard.rendering import TEMPLATES
from roofwatch.dashboard.roofline_chart import KernelPoint, roofline_figure
from roofwatch.roofline import CacheRoof, Peaks

HOSTILE = [*NAMES.values(), LINK, SHAPE, IMPL, SUITE, TEST_ID, MESSAGE, TITLE, AUTHOR, SPECIALIZATION, KERNEL]


# --- script_json: JSON that the HTML parser cannot end early -------------------------------------

@pytest.mark.parametrize(("value", "written"), [
    ("b2<!--<script>", '"b2\\u003c!--\\u003cscript\\u003e"'),
    ("</script><script>alert(1)</script>", '"\\u003c/script\\u003e\\u003cscript\\u003ealert(1)\\u003c/script\\u003e"'),
    ('<a href="https://evil.example/">x</a>', '"\\u003ca href=\\"https://evil.example/\\"\\u003ex\\u003c/a\\u003e"'),
    ("a & b", '"a \\u0026 b"'),
    ("line\u2028separator\u2029paragraph", '"line\\u2028separator\\u2029paragraph"'),
    ("<![CDATA[ ]]>", '"\\u003c![CDATA[ ]]\\u003e"'),
    ("plain µs", '"plain \\u00b5s"'),
])
def test_script_json_escapes_what_html_would_read(value: str, written: str) -> None:
    text = script_json({"name": value})
    assert text == '{"name": ' + written + "}"
    assert not set("<>&\u2028\u2029") & set(text)
    assert json.loads(text) == {"name": value}  # plain JSON: read back unchanged


def test_script_json_keeps_plotly_encoding() -> None:
    assert json.loads(script_json({"y": [1.5, float("nan"), None]})) == {"y": [1.5, None, None]}


@pytest.mark.parametrize(("value", "shown"), [
    ('<a href="https://evil.example/">dtype</a>', '&lt;a href="https://evil.example/"&gt;dtype&lt;/a&gt;'),
    ("<b>bold</b><br>", "&lt;b&gt;bold&lt;/b&gt;&lt;br&gt;"),
    ("&lt; already", "&amp;lt; already"),
    ("fp16", "fp16"),
    (64, "64"),
])
def test_plotly_text_is_shown_as_written(value: object, shown: str) -> None:
    assert plotly_text(value) == shown


# --- every figure builder, fed hostile names ---------------------------------------------------------

def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _assert_no_markup(figure: dict[str, Any]) -> None:
    for text in _strings(figure):
        assert not [raw for raw in RAW_MARKUP if raw in text], text
    assert "<" not in script_json(figure)


def _point(commit_id: int, title: str = TITLE) -> dict[str, Any]:
    return {"commit_id": commit_id, "position": commit_id, "sha": f"{commit_id:040x}", "title": title,
            "author": AUTHOR, "run_id": commit_id, "roofline_fraction": 0.5}


def test_benchmark_figure_escapes_names_titles_changes_and_units() -> None:
    points = [_point(i) for i in range(4)]
    series = [Series(name, i + 1, points, [1.0, 1.0, 1.3, 1.3]) for i, name in enumerate(NAMES.values())]
    change = {"commit_id": 2, "benchmark_id": 1, "kind": "perf-regression", "change_pct": 30.0,
              "device_class": LINK, "state": "new"}
    other = {**change, "benchmark_id": 2, "device_class": SHAPE}  # two devices: the label names them
    figure, _ = benchmark_figure(series, [change, other], Metric("raw", IMPL, 1.0, False))
    _assert_no_markup(figure)
    names = [trace["name"] for trace in figure["data"]]
    assert plotly_text(NAMES["comment"]) in names
    # The builder's own markup survives: bold SHAs and line breaks in the hover text.
    assert figure["data"][0]["hovertext"][0].startswith("<b>")
    assert "%{meta}" in figure["data"][1]["hovertemplate"]


def test_benchmark_figure_with_webgl_traces_escapes_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from roofwatch.dashboard import figures

    monkeypatch.setattr(figures, "WEBGL_ABOVE", 1)
    points = [_point(i) for i in range(3)]
    figure, _ = benchmark_figure([Series(NAMES["close"], 1, points, [1.0, 2.0, 3.0])], [],
                                 Metric("time", "s", 1.0, False))
    assert figure["data"][0]["type"] == "scattergl"
    _assert_no_markup(figure)


def test_distribution_figure_escapes_the_suites_unit() -> None:
    figure = distribution_figure([1.0, 1.1, 0.9], [1.3, 1.4, 1.2], unit=LINK)
    _assert_no_markup(figure)
    assert plotly_text(LINK) in figure["layout"]["yaxis"]["title"]["text"]


def test_roofline_figure_escapes_names_shapes_dtypes_impls_and_roofs() -> None:
    def point(i: int, run_id: int, median: float, name: str) -> KernelPoint:
        return KernelPoint(benchmark_id=i, name=name, shape=SHAPE, dtype=LINK, impl=IMPL, flops=2e9, bytes=1e8,
                           median=median, run_id=run_id, sha=f"{run_id:040x}")

    latest = [point(i, 2, 1e-4, name) for i, name in enumerate(NAMES.values())]
    earlier = [point(i, 1, 2e-4, name) for i, name in enumerate(NAMES.values())]
    peaks = Peaks(bandwidth=4e12, flops={"fp32": 50e12, LINK: 700e12}, source="measured",
                  caches=(CacheRoof(SPECIALIZATION, 50 * 2**20, 10e12),))
    for with_peaks in (peaks, None):
        figure = roofline_figure(latest, earlier, with_peaks)
        _assert_no_markup(figure)
        legend = [trace["name"] for trace in figure["data"] if trace["meta"] == "latest"]
        assert legend == [f"latest · {plotly_text(LINK)}"]


def test_compiled_history_figure_escapes_specializations_targets_and_titles() -> None:
    rows = [{"sha": f"{i:040x}", "title": TITLE, "specialization": SPECIALIZATION, "target": "sm_90<b>",
             "registers": 64, "shared_bytes": 0, "spill_bytes": 0, "sass_instructions": 10, "changed": i == 1,
             "run_id": i} for i in range(2)]
    figure = history_figure(rows)
    _assert_no_markup(figure)
    assert "<b>" not in json.dumps(figure)


# --- the PR comment and the templates ------------------------------------------------------------

def test_pr_comment_keeps_its_own_html_and_escapes_any_other() -> None:
    markdown = ("<!-- roofwatch:pull-request-report -->\n### roofwatch\n\n"
                "<details><summary>All 3 benchmarks</summary>\n\n| benchmark | Δ |\n|---|--:|\n"
                f"| `{NAMES['comment']}` | +1 % |\n\n</details>\n\n"
                f"text {NAMES['image']} and {LINK}\n")
    html = comment_html(markdown)
    assert "<details><summary>All 3 benchmarks</summary>" in html and "</details>" in html
    assert "<!-- roofwatch:pull-request-report -->" in html
    assert '<td class="align-right">' in html and "style=" not in html  # the CSP blocks style attributes
    for raw in ("<img", "<a href", "b2<!--"):
        assert raw not in html


def test_templates_autoescape_and_mark_nothing_safe() -> None:
    assert TEMPLATES.env.autoescape is True or TEMPLATES.env.autoescape("page.html")
    folder = Path(TEMPLATES.env.loader.searchpath[0])  # type: ignore[union-attr]
    for template in folder.glob("*.html"):
        text = template.read_text()
        assert not re.search(r"\|\s*safe\b", text), f"{template.name}: |safe"
        assert "{% autoescape false" not in text, template.name
        # No inline script or handler: the CSP allows scripts from this origin only.
        assert not re.search(r"<script(?![^>]*(\bsrc=|type=\"application/json\"))", text), template.name
        assert not re.search(r"\son[a-z]+=", text) and "style=" not in text, template.name


# --- every page over the hostile history ---------------------------------------------------------

@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('hostile') / 'roofwatch.db'}"
    return url, build(url)


@pytest.fixture
def client(hostile_db: tuple[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch,
           tmp_path: Path) -> Iterator[TestClient]:
    monkeypatch.setenv("ROOFWATCH_DATABASE_URL", hostile_db[0])
    monkeypatch.setenv("ROOFWATCH_DATA_DIR", str(tmp_path))
    _reset_caches()
    from roofwatch.service.api.app import create_app

    yield TestClient(create_app())
    _reset_caches()


def page_paths(ids: dict[str, Any]) -> list[str]:
    """Every dashboard page of the hostile history."""
    return ["/", f"/benchmarks/{ids['benchmarks']['comment']}", f"/benchmarks/{ids['benchmarks']['image']}",
            f"/runs/{ids['runs'][1]}", "/roofline", "/changes", f"/compare/{ids['comparison']}",
            f"/compiled/{ids['repository']}", f"/compiled/{ids['repository']}/kernel?name={quote(KERNEL)}"]


def test_no_page_carries_suite_markup(client: TestClient, hostile_db: tuple[str, dict[str, Any]]) -> None:
    assert escape(NAMES["comment"]) in client.get("/").text  # shown, as text
    for path in page_paths(hostile_db[1]):
        response = client.get(path)
        assert response.status_code == 200, path
        found = [value for value in HOSTILE if value in response.text]
        assert not found, (path, found)
        # Each embedded figure is JSON without a "<" the HTML parser could act on.
        for blob in re.findall(r'<script type="application/json" id="[\w-]+">(.*?)</script>', response.text, re.S):
            assert "<" not in blob and json.loads(blob)["data"]
