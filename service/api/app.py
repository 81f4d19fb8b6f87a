"""The ASGI application: JSON API, webhook endpoint, health check, Prometheus metrics and the dashboard."""

from __future__ import annotations

import gc
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from sqlalchemy import text
from starlette.types import ASGIApp

from roofwatch.dashboard.routes import mount as mount_dashboard
from roofwatch.service.api import docs
from roofwatch.service.api.json_api import router as api_router
from roofwatch.service.api.prometheus import router as metrics_router
from roofwatch.service.api.request_limits import AuthenticatedFirst
from roofwatch.service.api.security_headers import SecurityHeaders
from roofwatch.service.api.suites import router as suites_router
from roofwatch.service.api.uploads import router as upload_router
from roofwatch.service.api.webhooks import router as webhook_router
from roofwatch.service.core import embedded
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.requests import SessionDep
from roofwatch.service.github import reporting
from roofwatch.service.github.comment import comment_for

REPORT_SWEEP_S = 60.0
REPORT_SHUTDOWN_WAIT_S = 10.0


def _sweep_reports(stop: threading.Event) -> None:
    """Embedded mode's stand-in for the scheduled ``deliver_reports`` task.

    Due reports go to the reporter's lane, not the measuring one: a sweep during a GitHub outage
    must not keep the device from the next run.
    """
    while not stop.wait(REPORT_SWEEP_S):
        reporting.send_due()


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    stop = threading.Event()
    settings = get_settings()
    # Everything imported so far (plotly's figure classes, SQLAlchemy, FastAPI: ~200k objects)
    # lives as long as the process. Frozen, a full garbage collection no longer walks it: a
    # collection took ~130 ms on a 2-core host and landed on every few requests, which was
    # most of the p95 of pages answering in 50 ms at p50 (docs/performance.md).
    gc.freeze()
    if settings.embedded and settings.github_mode != "off":
        threading.Thread(target=_sweep_reports, args=(stop,), name="roofwatch-report-sweep", daemon=True).start()
    try:
        yield
    finally:
        stop.set()
        # What is still undelivered stays in the outbox; the next start's sweep sends it.
        embedded.REPORTS.drain(REPORT_SHUTDOWN_WAIT_S)


class _App(FastAPI):
    def build_middleware_stack(self) -> ASGIApp:
        # Outside Starlette's ServerErrorMiddleware, so the plain-text 500 it answers with when
        # a route crashes carries the security headers too.
        # Writes are authenticated and bounded before the routes (and FastAPI's body parsing) see them.
        return SecurityHeaders(AuthenticatedFirst(super().build_middleware_stack()))


def create_app() -> FastAPI:
    # /docs is served from local assets (service/api/docs.py); ReDoc and the OAuth2 redirect page are off.
    app = _App(title="roofwatch", summary="Performance-regression CI for GPU kernels", lifespan=lifespan,
               docs_url=None, redoc_url=None, swagger_ui_oauth2_redirect_url=None)
    app.include_router(api_router)
    app.include_router(webhook_router)
    app.include_router(metrics_router)
    app.include_router(upload_router)
    app.include_router(suites_router)

    @app.get("/healthz", tags=["ops"])
    def healthz(session: SessionDep) -> dict[str, str]:
        session.exec(text("SELECT 1"))  # type: ignore[call-overload]
        return {"status": "ok"}

    docs.mount(app)
    mount_dashboard(app, render_comment=comment_for)
    return app
