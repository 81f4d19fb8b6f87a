"""Security headers on every HTTP response: a Content-Security-Policy with a per-response nonce,
no framing, no content sniffing, no referrer beyond this origin.

The policy allows what the pages use and nothing else (docs/security.md, "The dashboard and the API"):

- scripts from this origin only (plotly.js, the dashboard's own scripts, Swagger UI's bundle); the
  one inline script, Swagger UI's start-up call that FastAPI writes into ``/docs``, carries the nonce;
- stylesheets from this origin, plus ``<style>`` elements carrying the nonce: plotly.js adds its
  rules (modebar, hover labels) to a ``<style id="plotly.js-style-global">`` through the CSSOM, so
  the dashboard's pages put that element in their head with the nonce for it to find;
- images from this origin, ``data:`` (Swagger UI's icons; plotly's "download plot" draws the SVG
  through a ``data:`` image) and ``blob:``;
- requests (``fetch``) to this origin only: triage buttons, Swagger UI's "try it out";
- ``'unsafe-eval'`` only on a response whose page asked for it (:func:`allow_unsafe_eval`): plotly's
  WebGL traces compile their shaders with ``new Function``, and the benchmark page draws a series
  of over 1,000 points with WebGL.

A pure ASGI middleware rather than ``BaseHTTPMiddleware``: it touches only the response start, so
streamed and file responses pass through unbuffered.
"""

from __future__ import annotations

import secrets

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from roofwatch.service.core.requests import EVAL_STATE_KEY, NONCE_STATE_KEY


def content_security_policy(nonce: str, unsafe_eval: bool = False) -> str:
    directives = {
        "default-src": "'none'",
        "script-src": f"'self' 'nonce-{nonce}'" + (" 'unsafe-eval'" if unsafe_eval else ""),
        "style-src": f"'self' 'nonce-{nonce}'",
        "img-src": "'self' data: blob:",
        "font-src": "'self'",
        "connect-src": "'self'",
        "form-action": "'self'",
        "base-uri": "'none'",
        "frame-ancestors": "'none'",
    }
    return "; ".join(f"{name} {value}" for name, value in directives.items())


def security_headers(nonce: str, unsafe_eval: bool = False) -> dict[str, str]:
    return {
        "Content-Security-Policy": content_security_policy(nonce, unsafe_eval),
        "X-Frame-Options": "DENY",  # frame-ancestors for browsers that predate it
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "same-origin",
        "Cross-Origin-Opener-Policy": "same-origin",
    }


class SecurityHeaders:
    """Adds :func:`security_headers` to every HTTP response, with a fresh nonce per request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        nonce = secrets.token_urlsafe(18)
        state = scope.setdefault("state", {})
        state[NONCE_STATE_KEY] = nonce

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in security_headers(nonce, bool(state.get(EVAL_STATE_KEY))).items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)
