"""Every dashboard address roofwatch hands out: in GitHub statuses, comments and on the terminal.

Absolute, on ``ROOFWATCH_PUBLIC_URL`` (the address readers reach the dashboard at), because a
link in a GitHub comment or a terminal is opened far from the server that wrote it.
"""

from __future__ import annotations

from roofwatch.service.core.config import get_settings


def dashboard_url(path: str = "/") -> str:
    """``path`` (absolute, e.g. ``/runs/3``) on the public dashboard address."""
    if not path.startswith("/"):
        raise ValueError(f"dashboard paths start with '/', got {path!r}")
    return get_settings().public_url.rstrip("/") + path


def run_url(run_id: int) -> str:
    """The page of one run: its suites, outcomes and measurements."""
    return dashboard_url(f"/runs/{run_id}")


def compare_url(comparison_id: int) -> str:
    """The page of one A/B comparison: the verdict per benchmark with its rounds."""
    return dashboard_url(f"/compare/{comparison_id}")

