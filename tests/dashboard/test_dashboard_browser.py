"""The dashboard in a real headless Chromium (Debian's package, driven by Playwright)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.browser import ARTIFACTS, page  # noqa: F401  (fixture: headless Chromium)
from support.live_server import serving

pytestmark = pytest.mark.browser


@pytest.fixture
def server(seeded_app) -> Iterator[str]:  # type: ignore[no-untyped-def]
    with serving(seeded_app) as url:
        yield url


def test_overview_and_benchmark_render_and_lead_to_runs(server: str, page) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    ARTIFACTS.mkdir(exist_ok=True)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server + "/")
    # The overview is a table with an SVG sparkline per benchmark, one vertex per measured commit.
    assert page.locator("#benchmarks svg.spark").count() == 2
    vertices = page.evaluate(
        "() => [...document.querySelectorAll('#benchmarks svg.spark polyline')].map(p => p.points.numberOfItems)"
    )
    assert vertices == [3, 3]
    page.screenshot(path=str(ARTIFACTS / "overview.png"), full_page=True)

    page.locator("#benchmarks a[href^='/benchmarks/']").first.click()
    page.wait_for_selector("#benchmark-chart .main-svg")
    # The benchmark chart plots one point per measured commit.
    assert page.evaluate("() => document.getElementById('benchmark-chart').data[0].y.length") == 3
    page.screenshot(path=str(ARTIFACTS / "benchmark.png"), full_page=True)

    # Clicking a point opens the run that measured it.
    box = page.locator("#benchmark-chart .scatterlayer .trace .points path").last.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_url("**/runs/*")
    page.wait_for_selector("#suites")

    page.goto(server + "/")
    page.locator("#runs a").first.click()
    page.wait_for_selector("#suites")
    assert page.locator("#suites tr").count() == 3  # header + two suites
    page.screenshot(path=str(ARTIFACTS / "run.png"), full_page=True)
    assert errors == []
