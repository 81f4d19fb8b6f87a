"""Dashboard pages: each lives in ``dashboard/pages``; this module mounts them, plotly.js and the
dashboard's own scripts and stylesheet (``dashboard/static``: pages carry no inline script or style).

Pages only read (the changes page's triage buttons write through the token-guarded JSON API):
they query through ``roofwatch.service.records.queries``, ``roofwatch.dashboard.reads`` and ``roofwatch.dashboard.roofline_reads``.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from roofwatch.dashboard.pages import benchmark, changes, compare, compiled, overview, roofline, run
from roofwatch.dashboard.pr_comment import CommentRenderer
from roofwatch.dashboard.rendering import PLOTLY_JS

STATIC = Path(__file__).parent / "static"
PAGES = (overview, run, compare, benchmark, roofline, changes, compiled)


def mount(app: FastAPI, render_comment: CommentRenderer | None = None) -> None:
    """The pages on ``app``; with ``render_comment`` the compare page shows the PR comment too."""
    app.state.render_pr_comment = render_comment

    @app.get("/static/plotly.min.js", include_in_schema=False)
    def plotly_js() -> FileResponse:
        # Served from the installed plotly package: the dashboard works offline and air-gapped.
        return FileResponse(PLOTLY_JS, media_type="application/javascript",
                            headers={"Cache-Control": "public, max-age=86400"})

    # After the route above, which would otherwise be looked for in this folder.
    app.mount("/static", StaticFiles(directory=STATIC), name="dashboard-static")
    for page in PAGES:
        page.register(app)
