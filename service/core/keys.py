"""Every idempotency key roofwatch makes, and every look-up by a key's prefix.

Same key, same row: a redelivered task or a repeated trigger finds the row it made before.
Keys carry the repository's full name, which may hold ``_`` or ``%``; a prefix look-up
therefore escapes them (``autoescape``) so that ``a_b`` never matches ``axb``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement
from sqlmodel import col

from service.core.models import Repository


def starts_with(column: Any, prefix: str) -> ColumnElement[bool]:
    """``column`` begins with ``prefix`` taken literally: LIKE's ``_`` and ``%`` escaped."""
    return col(column).startswith(prefix, autoescape=True)


def comparison_key(repository: Repository, base_sha: str, head_sha: str, device_fingerprint: str,
                   purpose: str, attempt: int = 0) -> str:
    return f"{comparison_key_prefix(repository, base_sha, head_sha, device_fingerprint, purpose)}{attempt}"


def comparison_key_prefix(repository: Repository, base_sha: str, head_sha: str, device_fingerprint: str,
                          purpose: str) -> str:
    """What every attempt of one comparison is keyed with, before its attempt number."""
    return f"{repository.full_name}@{base_sha}..{head_sha}:{device_fingerprint}:{purpose}:"


def bisect_key_prefix(repository: Repository, sha: str, device_fingerprint: str) -> str:
    """What every bisect run of ``sha`` on a device is keyed with, before its attempt number."""
    return f"{repository.full_name}@{sha}:{device_fingerprint}:bisect:"


def bisect_key(repository: Repository, sha: str, device_fingerprint: str, attempt: int = 0) -> str:
    return f"{bisect_key_prefix(repository, sha, device_fingerprint)}{attempt}"
