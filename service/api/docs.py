"""``/docs``: Swagger UI served from this origin, so the API docs work air-gapped and under the CSP.

FastAPI's own ``/docs`` loads Swagger UI from a CDN. The assets here come from the installed
``fastapi-offline`` package (Swagger UI 5, which reads the OpenAPI 3.1 FastAPI writes); the page is
FastAPI's ``get_swagger_ui_html`` pointed at them. ReDoc and the OAuth2 redirect page are off: the
API authenticates with a bearer token, which Swagger UI's "Authorize" takes directly.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from roofwatch.service.core.requests import csp_nonce

ASSETS = Path(fastapi_offline.__file__).parent / "static"
ASSETS_URL = "/docs/static"
# Swagger UI's validator badge is an image from validator.swagger.io: a request to another origin.
SWAGGER_PARAMETERS = {"validatorUrl": None}


def mount(app: FastAPI) -> None:
    """``/docs`` and its assets under ``/docs/static`` on ``app`` (built with ``docs_url=None``)."""
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        page = get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} API",
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js", swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon.png", oauth2_redirect_url=None,
            swagger_ui_parameters=SWAGGER_PARAMETERS,
        )
        # The page's one inline script starts Swagger UI; the nonce lets it run under script-src 'self'.
        html = bytes(page.body).decode()
        if html.count("<script>") != 1:
            raise RuntimeError("FastAPI's Swagger UI page changed: its inline script no longer gets the nonce")
        return HTMLResponse(html.replace("<script>", f'<script nonce="{csp_nonce(request)}">'))
