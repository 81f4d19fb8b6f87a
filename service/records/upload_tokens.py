"""Per-repository upload tokens: made, looked up and revoked. Only their SHA-256 is stored."""

from __future__ import annotations

import hashlib
import secrets

from sqlmodel import Session, col, select

from roofwatch.service.core.models import Repository, UploadToken, utcnow

PREFIX = "rwu_"  # recognisable in a CI secret store and in a leak scanner's rules


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def issue(session: Session, repository: Repository, label: str = "") -> tuple[UploadToken, str]:
    """A new upload token for ``repository``: its row and the token itself (shown once)."""
    token = PREFIX + secrets.token_urlsafe(32)
    row = UploadToken(repository_id=repository.id, token_sha256=_digest(token), label=label)  # type: ignore[arg-type]
    session.add(row)
    session.flush()
    return row, token


def find(session: Session, token: str) -> UploadToken | None:
    """The live token row ``token`` names, or None (unknown or revoked).

    The look-up is by a hash of the token, so its time does not depend on how much of a
    guess matches a stored token.
    """
    if not token.startswith(PREFIX):
        return None
    row = session.exec(select(UploadToken).where(UploadToken.token_sha256 == _digest(token))).first()
    return row if row is not None and row.revoked_at is None else None


def listed(session: Session, repository: Repository) -> list[UploadToken]:
    return list(session.exec(select(UploadToken).where(UploadToken.repository_id == repository.id)
                             .order_by(col(UploadToken.id))))


def revoke(session: Session, repository: Repository, token_id: int) -> bool:
    """Revoke one of ``repository``'s tokens; False when it has no such live token."""
    row = session.get(UploadToken, token_id)
    if row is None or row.repository_id != repository.id or row.revoked_at is not None:
        return False
    row.revoked_at = utcnow()
    session.add(row)
    return True
