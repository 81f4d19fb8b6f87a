"""FastAPI dependencies."""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlmodel import Session

from roofwatch.service.core.config import get_settings
from roofwatch.service.core.db import get_engine


def get_session() -> Iterator[Session]:
    with Session(get_engine()) as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


_bearer = HTTPBearer(auto_error=False)


def require_token(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> str:
    """Write endpoints need ``Authorization: Bearer <ROOFWATCH_API_TOKEN>``; compared in constant time."""
    expected = get_settings().api_token
    if not expected:
        raise HTTPException(403, "write actions are disabled: set ROOFWATCH_API_TOKEN on the server")
    if credentials is None or not hmac.compare_digest(credentials.credentials.encode(), expected.encode()):
        raise HTTPException(401, "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"})
    return "api-token"


TokenDep = Annotated[str, Depends(require_token)]
