"""Security headers on every response, and the pages under their Content-Security-Policy in a real browser.

The browser tests open every dashboard page and ``/docs`` over a history whose suite strings are
all markup (tests/support/hostile_history.py) and listen for ``securitypolicyviolation`` events, page
errors and any request that leaves the origin.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from support.browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, page  # noqa: F401  (fixture)
from support.environment import _reset_caches
from support.hostile_history import LINK, NAMES, build
from support.live_server import serving
from test_dashboard_escaping import page_paths

from roofwatch.service.api.security_headers import content_security_policy


def _directives(policy: str) -> dict[str, list[str]]:
    return {name: values for name, *values in (part.split() for part in policy.split(";"))}


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('hostile') / 'roofwatch.db'}"
    return url, build(url)


@pytest.fixture
def app(hostile_db: tuple[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FastAPI]:
    monkeypatch.setenv("ROOFWATCH_DATABASE_URL", hostile_db[0])
    monkeypatch.setenv("ROOFWATCH_DATA_DIR", str(tmp_path))
    _reset_caches()
    from roofwatch.service.api.app import create_app

    yield create_app()
    _reset_caches()


@pytest.fixture
def ids(hostile_db: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return hostile_db[1]


# --- the headers ---------------------------------------------------------------------------------

def test_policy_allows_no_inline_code_and_no_other_origin() -> None:
    policy = _directives(content_security_policy("abc"))
    assert policy["default-src"] == ["'none'"]
    assert policy["script-src"] == ["'self'", "'nonce-abc'"] and policy["style-src"] == ["'self'", "'nonce-abc'"]
    assert policy["frame-ancestors"] == ["'none'"] and policy["base-uri"] == ["'none'"]
    assert policy["img-src"] == ["'self'", "data:", "blob:"]
    assert policy["connect-src"] == ["'self'"] and policy["form-action"] == ["'self'"]
    assert "'unsafe-inline'" not in content_security_policy("abc")
    assert _directives(content_security_policy("abc", unsafe_eval=True))["script-src"][-1] == "'unsafe-eval'"


def test_every_kind_of_response_carries_the_headers(app: FastAPI, ids: dict[str, Any]) -> None:
    client = TestClient(app)
    routes = [*page_paths(ids), "/api/runs", "/api/benchmarks", "/healthz", "/metrics", "/openapi.json", "/docs",
              "/docs/static/swagger-ui.css", "/static/plotly.min.js", "/static/dashboard.js", "/no/such/page",
              "/benchmarks/999999"]
    nonces = set()
    for path in routes:
        response = client.get(path)
        assert response.status_code in (200, 404), path
        headers = response.headers
        assert headers["x-frame-options"] == "DENY", path
        assert headers["x-content-type-options"] == "nosniff", path
        assert headers["referrer-policy"] == "same-origin", path
        policy = _directives(headers["content-security-policy"])
        assert policy["frame-ancestors"] == ["'none'"] and "'unsafe-eval'" not in policy["script-src"], path
        nonce = policy["script-src"][1][len("'nonce-"):-1]
        nonces.add(nonce)
        if response.status_code == 200 and headers["content-type"].startswith("text/html") and path != "/docs":
            # The element of a page that carries the nonce: where plotly.js writes its rules.
            assert f'<style id="plotly.js-style-global" nonce="{nonce}">' in response.text, path
    assert len(nonces) == len(routes)  # a fresh nonce per response
    assert client.post("/webhooks/github", content=b"{}").headers["x-frame-options"] == "DENY"


def test_docs_are_served_from_this_origin(app: FastAPI) -> None:
    client = TestClient(app)
    response = client.get("/docs")
    assert response.status_code == 200
    nonce = _directives(response.headers["content-security-policy"])["script-src"][1][len("'nonce-"):-1]
    assert re.findall(r'(?:src|href)="([^"]+)"', response.text) == [
        "/docs/static/swagger-ui.css", "/docs/static/favicon.png", "/docs/static/swagger-ui-bundle.js"]
    assert f'<script nonce="{nonce}">' in response.text and "validatorUrl" in response.text
    assert "http://" not in response.text and "https://" not in response.text
    for asset in ("swagger-ui.css", "swagger-ui-bundle.js", "favicon.png"):
        assert client.get(f"/docs/static/{asset}").status_code == 200
    assert client.get("/redoc").status_code == 404 and client.get("/docs/oauth2-redirect").status_code == 404


# --- in the browser ------------------------------------------------------------------------------

class Watch:
    """What a page did that the policy or the origin rule forbids."""

    REPORT = ("document.addEventListener('securitypolicyviolation', e => "
              "window.__violations.push(e.violatedDirective + ' ' + e.blockedURI + ' ' + (e.sample || '')));"
              "window.__violations = [];")

    def __init__(self, page: Any, origin: str) -> None:  # noqa: F811
        self.page, self.origin = page, origin
        self.errors: list[str] = []
        self.foreign: list[str] = []
        page.add_init_script(self.REPORT)
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.on("console", self._console)
        page.on("request", self._request)
        page.on("response", self._response)

    def _console(self, message: Any) -> None:
        url = (message.location or {}).get("url", "")
        if "Content Security Policy" in message.text:
            self.errors.append(message.text)
        elif "Failed to load resource" in message.text and "/api/" not in url:  # the browser's own fetch, the icon
            self.errors.append(f"{message.text} {url}")

    def _request(self, request: Any) -> None:
        if not request.url.startswith((self.origin + "/", "data:", "blob:")):
            self.foreign.append(request.url)

    def _response(self, response: Any) -> None:
        # what the page itself loads (a stylesheet, a script, its icon) must be there; the API calls its
        # buttons make answer for themselves (a triage without a token is refused, and says so)
        if response.status >= 400 and response.request.resource_type not in ("fetch", "xhr"):
            self.errors.append(f"{response.status} {response.url}")

    def visit(self, path: str) -> None:
        self.page.goto(self.origin + path)
        self.page.wait_for_load_state("networkidle")

    def check(self, where: str) -> None:
        violations = self.page.evaluate("() => window.__violations")
        assert (violations, self.errors, self.foreign) == ([], [], []), where


@pytest.mark.browser
def test_every_page_renders_under_the_policy(app: FastAPI, ids: dict[str, Any], page) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    ARTIFACTS.mkdir(exist_ok=True)
    with serving(app) as origin:
        watch = Watch(page, origin)
        for path in page_paths(ids):
            watch.visit(path)
            watch.check(path)
        # Plotly's own controls work too: the legend toggles a trace, the PNG download draws through data:.
        watch.visit(f"/benchmarks/{ids['benchmarks']['comment']}")
        page.locator("#benchmark-chart .legendtoggle").first.click()
        page.hover("#benchmark-chart")
        with page.expect_download() as download:
            page.locator("#benchmark-chart .modebar-btn[data-title='Download plot as a PNG']").click()
        assert download.value.suggested_filename.endswith(".png")
        watch.check("legend and download")
        # Triage buttons call the API from the page's own script file.
        watch.visit("/changes")
        page.locator("#changes button[data-state='expected']").first.click()
        page.wait_for_selector("#changes .action-message.error")
        watch.check("changes buttons")


@pytest.mark.browser
def test_hostile_names_on_the_roofline_stay_text(app: FastAPI, page) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    ARTIFACTS.mkdir(exist_ok=True)
    with serving(app) as origin:
        watch = Watch(page, origin)
        watch.visit("/roofline")
        page.wait_for_selector("#roofline .main-svg")
        # The dtype is the legend's text, not a link; no element of the chart is one.
        legend = page.locator("#roofline .legendtext").all_text_contents()
        assert f"latest · {LINK}" in legend
        assert page.locator("#roofline a").count() == 0 and page.locator("a[href*='evil.example']").count() == 0
        # The benchmark named b2<!--<script> did not blank the chart: every point is drawn, its hover is text.
        assert page.evaluate("() => document.getElementById('roofline').data.length") >= 5
        point = page.locator("#roofline .scatterlayer .trace:last-child .points path").first
        box = point.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.wait_for_selector("#roofline .hovertext")
        assert any(name in page.locator("#roofline .hovertext").first.text_content() for name in NAMES.values())
        page.screenshot(path=str(ARTIFACTS / "roofline-hostile.png"), full_page=True)
        watch.check("/roofline")


@pytest.mark.browser
def test_api_docs_list_the_operations_from_this_origin(app: FastAPI, page) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    with serving(app) as origin:
        watch = Watch(page, origin)
        watch.visit("/docs")
        page.wait_for_selector(".opblock")
        paths = page.locator(".opblock-summary-path").all_text_contents()
        assert any("/api/runs" in p for p in paths) and any("/healthz" in p for p in paths)
        page.locator(".opblock-summary").first.click()  # an operation opens
        page.wait_for_selector(".opblock-body")
        watch.check("/docs")


@pytest.fixture
def webgl_page():  # type: ignore[no-untyped-def]
    """Chromium with a software WebGL (SwiftShader): ``page`` turns the GPU, and so WebGL, off."""
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed")
    from playwright.sync_api import sync_playwright

    args = [a for a in CHROMIUM_ARGS if a != "--disable-gpu"]
    args += ["--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--ignore-gpu-blocklist"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
        yield browser.new_page(viewport={"width": 1400, "height": 1000})
        browser.close()


@pytest.mark.browser
def test_webgl_charts_get_unsafe_eval_and_only_they(app: FastAPI, ids: dict[str, Any], webgl_page,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from roofwatch.dashboard import figures

    path = f"/benchmarks/{ids['benchmarks']['comment']}"
    client = TestClient(app)
    assert "'unsafe-eval'" not in client.get(path).headers["content-security-policy"]
    monkeypatch.setattr(figures, "WEBGL_ABOVE", 2)  # the history's 4 points make a "long" series
    assert "'unsafe-eval'" in client.get(path).headers["content-security-policy"]
    assert "'unsafe-eval'" not in client.get("/roofline").headers["content-security-policy"]
    with serving(app) as origin:
        watch = Watch(webgl_page, origin)
        watch.visit(path)
        assert webgl_page.evaluate("() => document.getElementById('benchmark-chart').data[0].type") == "scattergl"
        assert webgl_page.locator("#benchmark-chart .gl-container canvas").count() > 0
        assert webgl_page.locator("#benchmark-chart .no-webgl").count() == 0
        watch.check(path)


def test_a_crashing_route_still_answers_with_the_headers(app: FastAPI) -> None:
    @app.get("/crash-for-test")
    def crash() -> None:
        raise RuntimeError("boom")

    response = TestClient(app, raise_server_exceptions=False).get("/crash-for-test")
    assert response.status_code == 500
    assert response.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
