"""Headless Chromium for the tests that look at pages: Debian's package, driven by Playwright."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support.environment import IN_CI

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"  # screenshots, kept by CI
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture
def page():  # type: ignore[no-untyped-def]
    """A page of a fresh headless Chromium, 1400 × 1000."""
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
