"""Signed webhook deliveries built from GitHub's own payload examples in ``../shared/corpus``."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from httpx import Response

from roofwatch.service.github.signature import sign

SECRET = "It's a Secret to Everybody"


@contextmanager
def webhook_client(repository: str, mirror: Path) -> Iterator[TestClient]:
    """The app (embedded, migrated, signed with ``SECRET``) with ``repository`` registered on an empty mirror.

    The caller has set ``ROOFWATCH_GITHUB_WEBHOOK_SECRET`` and reset the cached settings. The
    background work the deliveries started has finished when the block ends.
    """
    from roofwatch.service.api.app import create_app
    from roofwatch.service.core import embedded
    from roofwatch.service.core.db import migrate, session_scope
    from roofwatch.service.records.repositories import register

    migrate()
    mirror.mkdir()
    with session_scope() as session:
        register(session, repository, str(mirror), default_branch="master")
    with TestClient(create_app()) as test_client:
        yield test_client
    assert embedded.MEASURE.drain(120)


def deliver(client: TestClient, event: str, payload: dict[str, Any] | bytes, secret: str = SECRET,
            delivery: str | None = None, signature: str | None = None) -> Response:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
               "X-Hub-Signature-256": signature if signature is not None else sign(secret, body),
               "Content-Type": "application/json"}
    return client.post("/webhooks/github", content=body, headers=headers)


def example(corpus: Path, name: str) -> dict[str, Any]:
    return json.loads((corpus / "webhooks" / name).read_text())


def pull_request_payload(corpus: Path, action: str, repository: str, number: int, head_sha: str, base_sha: str,
                         base_ref: str = "main", head_repository: str | None = None,
                         association: str = "OWNER", login: str = "octocat",
                         installation_id: int | None = None) -> dict[str, Any]:
    """GitHub's ``pull_request.opened`` example, pointed at a repository and commits of the test's."""
    data = copy.deepcopy(example(corpus, "pull_request/opened.payload.json"))
    data["action"], data["number"] = action, number
    pr = data["pull_request"]
    pr["number"], pr["author_association"] = number, association
    pr["user"]["login"] = login
    pr["head"]["sha"], pr["base"]["sha"], pr["base"]["ref"] = head_sha, base_sha, base_ref
    pr["head"]["repo"]["full_name"] = head_repository or repository
    pr["base"]["repo"]["full_name"] = repository
    data["repository"]["full_name"] = repository
    data["repository"]["default_branch"] = base_ref
    if installation_id is None:
        data.pop("installation", None)
    else:
        data["installation"]["id"] = installation_id
    return data


def comment_payload(corpus: Path, repository: str, number: int, body: str, association: str = "OWNER",
                    on_pull_request: bool = True, login: str | None = None,
                    created_at: datetime | None = None) -> dict[str, Any]:
    """GitHub's ``issue_comment.created`` example; made now (an approval covers the head of its time) unless told."""
    data = copy.deepcopy(example(corpus, "issue_comment/created.payload.json"))
    data["issue"]["number"] = number
    data["comment"]["created_at"] = (created_at or datetime.now(UTC)).isoformat().replace("+00:00", "Z")
    if login is not None:
        data["comment"]["user"]["login"] = data["sender"]["login"] = login
    if on_pull_request:
        data["issue"]["pull_request"] = {"url": f"https://api.github.com/repos/{repository}/pulls/{number}"}
    else:
        data["issue"].pop("pull_request", None)
    data["comment"]["body"], data["comment"]["author_association"] = body, association
    data["repository"]["full_name"] = repository
    data.pop("installation", None)
    return data
