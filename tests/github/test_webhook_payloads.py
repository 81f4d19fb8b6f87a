"""Signed but malformed deliveries: 400 with a reason and nothing recorded, never a 500, never a crash later.

Each case starts from one of GitHub's own payload examples, signed with the right secret, and
breaks one thing the way an attacker (or a bug) would. The repository is registered, so a
payload that got through validation would be acted on.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import select
from support.github_support import SECRET, deliver, example, webhook_client

from roofwatch.service.core import embedded
from roofwatch.service.github.signature import sign

REPO = "Codertocat/Hello-World"
Edit = Callable[[dict[str, Any]], Any]


@pytest.fixture
def client(roofwatch_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    from support.environment import _reset_caches

    monkeypatch.setenv("ROOFWATCH_GITHUB_WEBHOOK_SECRET", SECRET)
    _reset_caches()
    with webhook_client(REPO, tmp_path / "empty-mirror") as test_client:
        yield test_client


def _deliveries() -> list[tuple[str, str, str, str]]:
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import WebhookDelivery

    with session_scope() as session:
        return [(d.event, d.action, d.outcome, d.detail) for d in session.exec(select(WebhookDelivery)).all()]


def _set(path: str, value: Any) -> Edit:
    """An edit that puts ``value`` at the dotted ``path`` (list indices as numbers)."""
    def edit(data: dict[str, Any]) -> Any:
        *parents, last = path.split(".")
        target: Any = data
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        target[last] = value
        return data
    return edit


def _raw(text: str) -> Edit:
    return lambda _: text.encode()


DEEP = "[" * 2000 + "]" * 2000
HUGE = "9" * 5000

CASES: list[tuple[str, str, str, Edit, str]] = [
    # (id, event, example, edit, what the 400 says)
    ("2000-deep list", "ping", "ping/payload.json", _raw('{"zen": ' + DEEP + "}"), "nests deeper than"),
    ("2000-deep list, event ignored", "check_run", "check_run/created.payload.json",
     _raw('{"action": "created", "x": ' + DEEP + "}"), "nests deeper than"),
    ("100-deep objects", "push", "push/payload.json",
     _raw('{"ref": ' + '{"a": ' * 100 + "1" + "}" * 100 + "}"), "nests deeper than"),
    ("5000-digit integer", "ping", "ping/payload.json", _raw('{"hook_id": ' + HUGE + "}"), "5000 digits"),
    ("5000-digit integer, ignored field", "push", "push/payload.json",
     _raw('{"ref": "refs/heads/master", "size": ' + HUGE + "}"), "5000 digits"),
    ("NaN", "ping", "ping/payload.json", _raw('{"hook_id": NaN}'), "NaN is not a JSON number"),
    ("not UTF-8", "ping", "ping/payload.json", lambda _: b'{"zen": "\xff\xfe"}', "not UTF-8"),
    ("installation.id 2**64", "installation", "installation/created.payload.json",
     _set("installation.id", 2**64), "installation.id"),
    ("installation.id 2**63 on a pull request", "pull_request", "pull_request/opened.payload.json",
     _set("installation.id", 2**63), "installation.id"),
    ("installation.id 0", "push", "push/with-new-branch.payload.json", _set("installation", {"id": 0}),
     "installation.id"),
    ("pull request number 2**63", "pull_request", "pull_request/opened.payload.json", _set("number", 2**63),
     "number: Input should be less than or equal to 2147483647"),
    ("pull_request.number 2**31", "pull_request", "pull_request/opened.payload.json",
     _set("pull_request.number", 2**31), "pull_request.number"),
    ("pull request number 0", "pull_request", "pull_request/opened.payload.json", _set("number", 0), "number"),
    ("pull request number -1", "pull_request", "pull_request/opened.payload.json", _set("number", -1), "number"),
    ('pull request number "21"', "pull_request", "pull_request/opened.payload.json", _set("number", "21"),
     "number: Input should be a valid integer"),
    ("pull request number true", "pull_request", "pull_request/opened.payload.json", _set("number", True),
     "number: Input should be a valid integer"),
    ("pull request number 21.0", "pull_request", "pull_request/opened.payload.json", _set("number", 21.0),
     "number: Input should be a valid integer"),
    ('issue number "1"', "issue_comment", "issue_comment/created.payload.json", _set("issue.number", "1"),
     "issue.number"),
    ("issue number 2**63", "issue_comment", "issue_comment/created.payload.json", _set("issue.number", 2**63),
     "issue.number"),
    ("comment created_at a number", "issue_comment", "issue_comment/created.payload.json",
     _set("comment.created_at", 1700000000), "comment.created_at"),
    ('deleted "false"', "push", "push/with-new-branch.payload.json", _set("deleted", "false"),
     "deleted: Input should be a valid boolean"),
    ("deleted 0", "push", "push/with-new-branch.payload.json", _set("deleted", 0), "deleted"),
    ("after a number", "push", "push/with-new-branch.payload.json", _set("after", 123), "after"),
    ("ref null", "push", "push/with-new-branch.payload.json", _set("ref", None), "ref"),
    ("repository a string", "push", "push/with-new-branch.payload.json", _set("repository", REPO), "repository"),
    ("labels an object", "pull_request", "pull_request/opened.payload.json",
     _set("pull_request.labels", {"name": "x"}), "pull_request.labels"),
    ("hook_id 2**64", "ping", "ping/payload.json", _set("hook_id", 2**64), "hook_id"),
]


@pytest.mark.parametrize(("event", "name", "edit", "reason"), [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_a_malformed_signed_payload_is_a_400_with_its_reason(client: TestClient, shared_corpus: Path, event: str,
                                                             name: str, edit: Edit, reason: str) -> None:
    payload = edit(copy.deepcopy(example(shared_corpus, name)))
    response = deliver(client, event, payload)
    assert response.status_code == 400, response.text
    assert reason in response.json()["detail"]
    assert _deliveries() == []


@pytest.mark.parametrize(("event", "delivery"), [("x" * 101, "d-1"), ("ping", "d" * 101)],
                         ids=["long event", "long delivery id"])
def test_header_values_longer_than_githubs_are_a_400(client: TestClient, event: str, delivery: str) -> None:
    body = b'{"zen": "hi"}'
    response = client.post("/webhooks/github", content=body, headers={
        "X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "X-Hub-Signature-256": sign(SECRET, body)})
    assert response.status_code == 400 and "at most 100 characters" in response.json()["detail"]
    assert _deliveries() == []


def test_the_largest_values_github_may_send_are_accepted(database_url: str, shared_corpus: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The bounds are GitHub's: a 64-bit installation id and a 31-bit pull request number pass and are stored."""
    import uuid

    from support.environment import _reset_caches

    monkeypatch.setenv("ROOFWATCH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ROOFWATCH_DATABASE_URL", database_url)
    monkeypatch.delenv("ROOFWATCH_BROKER_URL", raising=False)
    monkeypatch.setenv("ROOFWATCH_GITHUB_WEBHOOK_SECRET", SECRET)
    _reset_caches()
    from roofwatch.service.api.app import create_app
    from roofwatch.service.core.db import migrate, session_scope
    from roofwatch.service.core.models import Repository
    from roofwatch.service.records.repositories import register

    migrate()
    name = f"acme/large-{uuid.uuid4().hex[:8]}"
    with session_scope() as session:
        register(session, name, str(tmp_path))
    payload = example(shared_corpus, "pull_request/labeled.payload.json")
    payload["repository"]["full_name"] = name
    payload["installation"] = {"id": 2**63 - 1}
    payload["number"] = payload["pull_request"]["number"] = 2**31 - 1
    with TestClient(create_app()) as client:
        response = deliver(client, "pull_request", payload)
    assert response.status_code == 202, response.text
    with session_scope() as session:
        assert session.exec(select(Repository).where(Repository.full_name == name)).one().installation_id == 2**63 - 1
    assert embedded.MEASURE.drain(60)
    _reset_caches()


def test_an_unknown_event_with_an_odd_action_is_recorded_cleanly(client: TestClient) -> None:
    body = json.dumps({"action": [[1, 2], {"x": None}], "anything": True}).encode()
    response = deliver(client, "check_run", body, delivery="odd-action")
    assert response.status_code == 202 and response.json()["outcome"] == "ignored"
    assert _deliveries() == [("check_run", "", "ignored", "event 'check_run' is not one roofwatch acts on")]


def test_a_background_failure_records_the_outcome(client: TestClient, shared_corpus: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in handling an accepted delivery leaves 'failed' with a reason, not 'accepted' forever."""
    from roofwatch.service.flows import github_events

    def broken(payload: object) -> str:
        raise OverflowError("Python int too large to convert to SQLite INTEGER")

    monkeypatch.setattr(github_events, "handle", broken)
    payload = example(shared_corpus, "push/with-new-branch.payload.json")
    payload["ref"] = "refs/heads/master"
    response = deliver(client, "push", payload)
    assert response.status_code == 202 and response.json()["outcome"] == "accepted"
    assert embedded.MEASURE.drain(60)
    ((event, _, outcome, detail),) = _deliveries()
    assert (event, outcome) == ("push", "failed")
    assert "roofwatch failed on it (OverflowError)" in detail
