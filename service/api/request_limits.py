"""Write requests are authenticated, then bounded, before any of their body is read.

FastAPI reads and parses a body before it resolves a route's dependencies, so a token check
in a dependency comes too late: 160 MB sent to ``PATCH /api/changes/1`` without a token were
parsed (13 s, 1.3 GB) before the 401. This middleware answers 401/403 from the headers alone,
413 from ``Content-Length``, and counts a streamed body as it arrives (413 past the route's
limit), so at most one limit's worth is ever held. The route still checks what the token may do.

Every request, read or write, whose path or query holds a NUL (``%00``) gets 422, shaped as
FastAPI's validation errors are: no parameter needs one, and PostgreSQL refuses it in any text
it is compared with.
"""

from __future__ import annotations

import json

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from roofwatch.service.api.deps import authenticate, refusal

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
KIB, MIB = 1024, 1024 * 1024
UPLOAD_BYTES = 64 * MIB  # nvbench files of large sweeps reach tens of MB
CONFIG_BYTES = 1 * MIB
OTHER_WRITE_BYTES = 64 * KIB  # a triage request is a few hundred bytes


def body_limit(path: str) -> int:
    """The most bytes a write to ``path`` may send."""
    if path == "/api/results":
        return UPLOAD_BYTES
    if path.startswith("/api/repositories/"):
        return CONFIG_BYTES
    return OTHER_WRITE_BYTES


def _bearer(headers: Headers) -> str | None:
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


async def _answer(send: Send, status: int, detail: object, extra: dict[str, str] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"connection", b"close")]
    headers += [(k.lower().encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class AuthenticatedFirst:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and _holds_nul(scope):
            await _answer(send, 422, [{"loc": ["query" if b"%00" in scope.get("query_string", b"") else "path"],
                                       "msg": "a NUL character is not allowed in a URL", "type": "value_error"}])
            return
        if scope["type"] != "http" or scope["method"] not in WRITE_METHODS or not scope["path"].startswith("/api/"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        token = _bearer(headers)
        if token is None or await run_in_threadpool(authenticate, token) is None:
            status, detail = refusal()
            await _answer(send, status, detail, {"WWW-Authenticate": "Bearer"} if status == 401 else None)
            return
        limit = body_limit(scope["path"])
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await _answer(send, 413 if declared.isdigit() else 400,
                          f"the body is over the {limit}-byte limit" if declared.isdigit()
                          else "Content-Length is not a number")
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > limit:
                await _answer(send, 413, f"the body is over the {limit}-byte limit")
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(bytes(body), receive), send)


def _holds_nul(scope: Scope) -> bool:
    return "\x00" in scope["path"] or b"%00" in scope.get("query_string", b"") or \
        b"\x00" in scope.get("query_string", b"")


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body already read, as one message; then the client's own messages (a disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
