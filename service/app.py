"""The ASGI application: JSON API, health check and the dashboard."""

from __future__ import annotations

from fastapi import FastAPI
from sqlalchemy import text

from dashboard.routes import mount as mount_dashboard
from service.api import router as api_router
from service.deps import SessionDep


def create_app() -> FastAPI:
    app = FastAPI(title="roofwatch", summary="Performance-regression CI for GPU kernels")
    app.include_router(api_router)

    @app.get("/healthz", tags=["ops"])
    def healthz(session: SessionDep) -> dict[str, str]:
        session.exec(text("SELECT 1"))  # type: ignore[call-overload]
        return {"status": "ok"}

    mount_dashboard(app)
    return app
