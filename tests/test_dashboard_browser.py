"""The dashboard in a real headless Chromium (Debian's package, driven by Playwright)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import IN_CI
from live_server import serving

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.browser


@pytest.fixture
def server(seeded_app) -> Iterator[str]:  # type: ignore[no-untyped-def]
    with serving(seeded_app) as url:
        yield url


@pytest.fixture
def page():  # type: ignore[no-untyped-def]
    if CHROMIUM is None:
        message = "Debian's chromium is not installed (scripts/test.sh installs it)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser.new_page(viewport={"width": 1400, "height": 1000})
        browser.close()


def test_overview_and_benchmark_render_and_lead_to_runs(server: str, page) -> None:  # type: ignore[no-untyped-def]
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
