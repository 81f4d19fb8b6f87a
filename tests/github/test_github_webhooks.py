"""``POST /webhooks/github``: signatures, bad input, duplicates, unknown repositories, GitHub's own examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlmodel import select
from support.github_support import SECRET, deliver, example

from roofwatch.service.core import embedded
from roofwatch.service.github.signature import sign, verify


@pytest.fixture
def client(roofwatch_env: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from support.environment import _reset_caches

    monkeypatch.setenv("ROOFWATCH_GITHUB_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("ROOFWATCH_WEBHOOK_MAX_BYTES", str(64 * 1024))
    _reset_caches()
    from roofwatch.service.api.app import create_app
    from roofwatch.service.core.db import migrate

    migrate()
    with TestClient(create_app()) as test_client:
        yield test_client
    assert embedded.MEASURE.drain(120)


def _deliveries() -> list[tuple[str, str, str]]:
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import WebhookDelivery

    with session_scope() as session:
        return [(d.event, d.outcome, d.detail) for d in session.exec(select(WebhookDelivery)).all()]


def test_githubs_documented_test_vector_verifies(shared_corpus: Path) -> None:
    vector = json.loads((shared_corpus / "github-docs" / "webhook-signature-test-vector.json").read_text())
    body = vector["payload"].encode()
    assert sign(vector["secret"], body) == vector["expected_header_value"]
    assert verify(vector["secret"], body, vector["expected_header_value"])
    assert not verify(vector["secret"], body + b" ", vector["expected_header_value"])
    assert not verify("another secret", body, vector["expected_header_value"])
    assert not verify(vector["secret"], body, vector["expected_signature"])  # the "sha256=" prefix is required
    assert not verify(vector["secret"], body, None)


def test_unsigned_or_wrongly_signed_deliveries_get_401(client: TestClient, shared_corpus: Path) -> None:
    payload = example(shared_corpus, "ping/payload.json")
    assert deliver(client, "ping", payload, signature="").status_code == 401
    assert deliver(client, "ping", payload, secret="not the secret").status_code == 401
    assert deliver(client, "ping", payload, signature="sha256=" + "0" * 64).status_code == 401
    assert _deliveries() == []  # nothing unauthenticated is recorded


def test_without_a_configured_secret_every_delivery_is_refused(client: TestClient, shared_corpus: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from roofwatch.service.core.config import get_settings

    monkeypatch.delenv("ROOFWATCH_GITHUB_WEBHOOK_SECRET")
    get_settings.cache_clear()
    response = deliver(client, "ping", example(shared_corpus, "ping/payload.json"))
    assert response.status_code == 401 and "ROOFWATCH_GITHUB_WEBHOOK_SECRET" in response.json()["detail"]


def test_malformed_or_misshapen_payloads_get_400_with_a_reason(client: TestClient, shared_corpus: Path) -> None:
    not_json = deliver(client, "push", b"{not json")
    assert not_json.status_code == 400 and "not JSON" in not_json.json()["detail"]
    array = deliver(client, "push", b"[1, 2]")
    assert array.status_code == 400 and "object" in array.json()["detail"]
    push = example(shared_corpus, "push/with-new-branch.payload.json")
    push["after"] = "not-a-sha"
    wrong = deliver(client, "push", push)
    assert wrong.status_code == 400 and "after" in wrong.json()["detail"]
    push["after"] = "6113728f27ae82c7b1a177c8d03f9e96e0adf246"
    del push["repository"]
    missing = deliver(client, "push", push)
    assert missing.status_code == 400 and "repository" in missing.json()["detail"]
    no_event = client.post("/webhooks/github", content=b"{}", headers={"X-Hub-Signature-256": sign(SECRET, b"{}")})
    assert no_event.status_code == 400


def test_a_body_over_the_limit_is_413(client: TestClient) -> None:
    body = json.dumps({"padding": "x" * 70_000}).encode()
    assert deliver(client, "push", body).status_code == 413


def test_a_repeated_delivery_is_a_no_op(client: TestClient, shared_corpus: Path) -> None:
    payload = example(shared_corpus, "ping/payload.json")
    first = deliver(client, "ping", payload, delivery="d-1")
    again = deliver(client, "ping", payload, delivery="d-1")
    assert first.status_code == 202 and first.json()["outcome"] == "ignored"
    assert again.status_code == 200 and again.json()["outcome"] == "duplicate"
    assert len(_deliveries()) == 1


def test_unknown_repositories_and_untracked_branches_are_recorded_and_ignored(client: TestClient,
                                                                              shared_corpus: Path) -> None:
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.records.repositories import register

    push = example(shared_corpus, "push/with-new-branch.payload.json")  # Codertocat/Hello-World, master
    response = deliver(client, "push", push)
    assert response.status_code == 202 and response.json()["outcome"] == "ignored"
    assert "not registered" in response.json()["detail"] and "roofwatch repo add" in response.json()["detail"]

    with session_scope() as session:
        register(session, "Codertocat/Hello-World", "/nonexistent", default_branch="main")
    push["repository"]["default_branch"] = "main"
    untracked = deliver(client, "push", push)
    assert untracked.json()["outcome"] == "ignored" and "not tracked" in untracked.json()["detail"]
    tag = deliver(client, "push", example(shared_corpus, "push/payload.json"))
    assert "not a branch" in tag.json()["detail"]
    outcomes = _deliveries()
    assert [o for _, o, _ in outcomes] == ["ignored"] * 3


def test_installation_events_record_the_installation(client: TestClient, shared_corpus: Path) -> None:
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import Repository
    from roofwatch.service.records.repositories import register

    created = example(shared_corpus, "installation/created.payload.json")
    name = created["repositories"][0]["full_name"]
    with session_scope() as session:
        register(session, name, "/nonexistent")
    assert deliver(client, "installation", created).status_code == 202
    with session_scope() as session:
        repository = session.exec(select(Repository).where(Repository.full_name == name)).one()
        assert repository.installation_id == created["installation"]["id"]
    deleted = dict(created, action="deleted")
    deliver(client, "installation", deleted)
    with session_scope() as session:
        assert session.exec(select(Repository).where(Repository.full_name == name)).one().installation_id is None


@pytest.mark.parametrize("registered", [False, True], ids=["unregistered", "registered"])
def test_every_github_payload_example_is_accepted_or_cleanly_ignored(client: TestClient, shared_corpus: Path,
                                                                     registered: bool, tmp_path: Path) -> None:
    """octokit/webhooks' examples, signed as GitHub signed them: none is refused, none is a 500."""
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import WebhookDelivery
    from roofwatch.service.records.repositories import register

    signatures = json.loads((shared_corpus / "webhooks" / "DERIVED-signatures.json").read_text())
    assert signatures["secret"] == SECRET
    if registered:
        empty = tmp_path / "empty-mirror"
        empty.mkdir()
        with session_scope() as session:
            for name in ("Codertocat/Hello-World", "Octocoders/Hello-World"):
                register(session, name, str(empty), default_branch="master")
    for index, (name, expected) in enumerate(sorted(signatures["signatures"].items())):
        body = (shared_corpus / "webhooks" / name).read_bytes()
        event = name.split("/")[0]
        response = deliver(client, event, body, signature=expected, delivery=f"example-{index}")
        assert response.status_code == 202, (name, response.status_code, response.text)
        assert response.json()["outcome"] in ("accepted", "ignored"), name
    assert embedded.MEASURE.drain(300)
    with session_scope() as session:
        records = session.exec(select(WebhookDelivery)).all()
        assert len(records) == len(signatures["signatures"])
        # Accepted work against a repository that cannot be fetched fails with a reason, not silently.
        assert all(r.detail for r in records)
        outcomes = {(r.event, r.action, r.outcome) for r in records}
        assert all(outcome != "accepted" or (event, action) == ("pull_request", "closed")
                   for event, action, outcome in outcomes), outcomes
        if registered:  # runs of the examples' pushes and pull requests were attempted and failed cleanly
            assert {("push", "", "failed"), ("pull_request", "opened", "failed")} <= outcomes
