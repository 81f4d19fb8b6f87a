"""Secrets are masked wherever roofwatch writes text: URL userinfo and GitHub token shapes."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from roofwatch.workers.redaction import redact, split_credentials

TOKEN = "ghp_0123456789abcdefghijABCDEFGHIJ012345"


@pytest.mark.parametrize(("text", "expected"), [
    (f"cannot fetch https://x-access-token:{TOKEN}@github.com/o/r.git: 403",
     "cannot fetch https://***@github.com/o/r.git: 403"),
    (f"token {TOKEN} leaked", "token *** leaked"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "***"),
    ("Authorization: Bearer abc.def-ghi", "Authorization: ***"),
    ("https://github.com/o/r.git", "https://github.com/o/r.git"),
    ("https://***@github.com/o/r.git", "https://***@github.com/o/r.git"),
])
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_split_credentials_keeps_the_url_usable() -> None:
    assert split_credentials(f"https://x-access-token:{TOKEN}@github.com/o/r.git") == (
        "https://github.com/o/r.git", f"x-access-token:{TOKEN}")
    assert split_credentials("/srv/git/r.git") == ("/srv/git/r.git", None)


def test_unauthenticated_repository_list_hides_clone_url_tokens(seeded_app) -> None:  # type: ignore[no-untyped-def]
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.records.repositories import register

    with session_scope() as session:
        register(session, "acme/secret", f"https://x-access-token:{TOKEN}@github.com/acme/secret.git")
    with TestClient(seeded_app) as client:
        body = client.get("/api/repositories").text
    assert TOKEN not in body
    assert "https://***@github.com/acme/secret.git" in body
