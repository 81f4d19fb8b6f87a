"""FastAPI dependencies: who a write request comes from (the database session is ``service.core.requests``'s).

Two kinds of bearer token: the admin token (``ROOFWATCH_API_TOKEN``) may do every write
(triage, suite configs, uploads for any repository); a repository's upload token
(``roofwatch token add``) may upload results for that repository and nothing else.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlmodel import Session

from roofwatch.service.core.config import get_settings
from roofwatch.service.core.db import get_engine
from roofwatch.service.records import upload_tokens

_bearer = HTTPBearer(auto_error=False)

DISABLED = "write actions are disabled: set ROOFWATCH_API_TOKEN on the server, or use a repository's upload token"
UNAUTHENTICATED = "a valid bearer token is required"


@dataclass(frozen=True)
class Actor:
    """Who a write comes from: ``repository_id`` None is the admin token (every repository)."""

    name: str
    repository_id: int | None = None

    @property
    def admin(self) -> bool:
        return self.repository_id is None

    def may_upload_to(self, repository_id: int | None) -> bool:
        return self.admin or self.repository_id == repository_id


def authenticate(token: str | None) -> Actor | None:
    """The actor a bearer token stands for, or None. The admin token is compared in constant time."""
    if not token:
        return None
    admin = get_settings().api_token
    if admin and hmac.compare_digest(token.encode("utf-8", "surrogatepass"), admin.encode()):
        return Actor("api-token")
    with Session(get_engine()) as session:
        row = upload_tokens.find(session, token)
    return Actor(f"upload-token {row.id}", row.repository_id) if row is not None else None


def refusal() -> tuple[int, str]:
    """The status and reason for a write without a valid token."""
    return (401, UNAUTHENTICATED) if get_settings().api_token else (403, DISABLED)


def _refuse() -> HTTPException:
    status, reason = refusal()
    return HTTPException(status, reason, headers={"WWW-Authenticate": "Bearer"} if status == 401 else None)


def require_actor(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> Actor:
    """Any valid token: the admin token or an upload token (which the route then checks)."""
    actor = authenticate(credentials.credentials if credentials else None)
    if actor is None:
        raise _refuse()
    return actor


def require_token(actor: Annotated[Actor, Depends(require_actor)]) -> str:
    """Admin writes need ``Authorization: Bearer <ROOFWATCH_API_TOKEN>``; an upload token gets 403."""
    if not actor.admin:
        raise HTTPException(403, "an upload token may only upload results; this needs the admin token "
                                 "(ROOFWATCH_API_TOKEN)")
    return actor.name


def admin_seen(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> bool:
    """Whether a read came with the admin token; without it (or with another) it is simply anonymous."""
    actor = authenticate(credentials.credentials if credentials else None)
    return actor is not None and actor.admin


TokenDep = Annotated[str, Depends(require_token)]
ActorDep = Annotated[Actor, Depends(require_actor)]
AdminSeen = Annotated[bool, Depends(admin_seen)]
