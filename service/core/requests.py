"""What the JSON API's and the dashboard's request handlers share: their database session, and
this response's Content-Security-Policy (its nonce, and whether its page may compile code).

Both sides stand on this module, so the dashboard never reaches into ``service.api`` (which
mounts it): ``service.api.security_headers`` writes the request state read here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends
from sqlmodel import Session
from starlette.requests import Request

from roofwatch.service.core.db import get_engine

NONCE_STATE_KEY = "csp_nonce"  # request.state.csp_nonce: this response's nonce
EVAL_STATE_KEY = "csp_unsafe_eval"  # set by a page that draws WebGL traces


def get_session() -> Iterator[Session]:
    with Session(get_engine()) as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


def csp_nonce(request: Request) -> str:
    """The nonce of the response being built for ``request``; empty outside the security-headers middleware."""
    return str(getattr(request.state, NONCE_STATE_KEY, ""))


def allow_unsafe_eval(request: Request) -> None:
    """Let this one response's scripts compile code (plotly's WebGL traces need it)."""
    setattr(request.state, EVAL_STATE_KEY, True)
