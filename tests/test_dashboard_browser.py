"""The dashboard in a real headless Chromium (Debian's package, driven by Playwright)."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from conftest import IN_CI

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.browser


@pytest.fixture
def server(seeded_app) -> Iterator[str]:  # type: ignore[no-untyped-def]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(seeded_app, host="127.0.0.1", port=port, log_level="warning")
    instance = uvicorn.Server(config)
    thread = threading.Thread(target=instance.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not instance.started:
        if time.monotonic() > deadline:
            raise RuntimeError("dashboard server did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    instance.should_exit = True
    thread.join(timeout=10)


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


def test_overview_charts_render_and_lead_to_runs(server: str, page) -> None:  # type: ignore[no-untyped-def]
    ARTIFACTS.mkdir(exist_ok=True)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server + "/")
    page.wait_for_selector(".chart .main-svg")
    charts = page.locator(".chart.js-plotly-plot")
    assert charts.count() == 2
    # Every chart plots one point per measured commit.
    points = page.evaluate(
        "() => [...document.querySelectorAll('.chart.js-plotly-plot')].map(el => el.data[0].y.length)"
    )
    assert points == [3, 3]
    page.screenshot(path=str(ARTIFACTS / "overview.png"), full_page=True)

    page.locator("#runs a").first.click()
    page.wait_for_selector("#suites")
    assert page.locator("#suites tr").count() == 3  # header + two suites
    page.screenshot(path=str(ARTIFACTS / "run.png"), full_page=True)
    assert errors == []
