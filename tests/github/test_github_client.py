"""The GitHub client and the report outbox against the fake GitHub server: auth, retries, outages."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlmodel import select
from support.fake_github import FakeGitHub

from roofwatch.service.github.client import AppAuth, GitHubClient, GitHubError
from roofwatch.service.github.comment import MARKER

REPO = "acme/kernels"
SHA = "a" * 40


def _client(fake: FakeGitHub, **options: object) -> GitHubClient:
    return GitHubClient(fake.url, token=FakeGitHub.STATIC_TOKEN, backoff=0.01, max_wait=2.0, **options)  # type: ignore[arg-type]


def _status(state: str = "pending") -> dict[str, str]:
    return {"state": state, "description": "queued", "target_url": "http://roofwatch.test/compare/1",
            "context": "roofwatch"}


def test_token_calls_conform_to_githubs_description(fake_github: FakeGitHub) -> None:
    with _client(fake_github) as client:
        client.create_status(REPO, SHA, _status())
        created = client.create_comment(REPO, 3, "hello")
        client.update_comment(REPO, created["id"], "hello again")
        assert [c["body"] for c in client.comments(REPO, 3)] == ["hello again"]
    assert fake_github.violations == []
    (call,) = fake_github.calls("repos/create-commit-status")
    assert call.headers["authorization"] == f"Bearer {FakeGitHub.STATIC_TOKEN}"
    assert call.headers["x-github-api-version"] and call.headers["user-agent"].startswith("roofwatch")


def test_comments_are_read_across_pages(fake_github: FakeGitHub) -> None:
    for i in range(230):
        fake_github.add_comment(REPO, 5, f"comment {i}")
    with _client(fake_github) as client:
        bodies = [c["body"] for c in client.comments(REPO, 5)]
    assert len(bodies) == 230 and bodies[-1] == "comment 229"
    assert len(fake_github.calls("issues/list-comments")) == 3


def test_server_errors_and_secondary_rate_limits_are_retried(fake_github: FakeGitHub) -> None:
    fake_github.fail_next("repos/create-commit-status", 502, times=2)
    fake_github.fail_next("issues/create-comment", 403, headers={"retry-after": "1"},
                          body={"message": "You have exceeded a secondary rate limit."})
    with _client(fake_github) as client:
        client.create_status(REPO, SHA, _status())
        client.create_comment(REPO, 3, "after a rate limit")
    assert [c.status for c in fake_github.calls("repos/create-commit-status")] == [502, 502, 201]
    assert [c.status for c in fake_github.calls("issues/create-comment")] == [403, 201]
    assert len(fake_github.statuses(REPO, SHA)) == 1


def test_collaborator_permission_reads_githubs_legacy_permission_and_is_retried(fake_github: FakeGitHub) -> None:
    """maintain is reported as write and triage as read; what decides an approval is that ``permission``."""
    from roofwatch.service.github import trust

    for login, role in (("ada", "admin"), ("mo", "maintain"), ("wu", "write"), ("tri", "triage"), ("rae", "read")):
        fake_github.set_permission(REPO, login, role)
    fake_github.fail_next("repos/get-collaborator-permission-level", 502)
    with _client(fake_github) as client:
        answers = {login: client.collaborator_permission(REPO, login)
                   for login in ("ada", "mo", "wu", "tri", "rae", "nobody")}
    assert {login: (a["permission"], a["role_name"]) for login, a in answers.items()} == {
        "ada": ("admin", "admin"), "mo": ("write", "maintain"), "wu": ("write", "write"),
        "tri": ("read", "triage"), "rae": ("read", "read"), "nobody": ("none", "none")}
    approving = {login for login, a in answers.items() if trust.permission_refusal(login, a["permission"]) is None}
    assert approving == {"ada", "mo", "wu"}
    assert [c.status for c in fake_github.calls("repos/get-collaborator-permission-level")][:2] == [502, 200]
    assert fake_github.violations == []


def test_what_keeps_failing_raises_and_client_errors_are_not_retried(fake_github: FakeGitHub) -> None:
    fake_github.down()
    with _client(fake_github, attempts=3) as client, pytest.raises(GitHubError, match="HTTP 503"):
        client.create_status(REPO, SHA, _status())
    fake_github.up()
    with _client(fake_github) as client, pytest.raises(GitHubError) as refused:
        client.create_status(REPO, SHA, _status("neutral"))  # not a commit-status state
    assert refused.value.status == 422 and len(fake_github.calls("repos/create-commit-status")) == 4


def test_app_auth_mints_an_installation_token_once_and_reuses_it(fake_github: FakeGitHub) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    fake_github.configure_app(4242, public)
    app = AppAuth("4242", pem.replace("\n", "\\n"))  # as an environment variable often carries it
    for _ in range(2):
        with GitHubClient(fake_github.url, app=app, installation_id=77, backoff=0.01) as client:
            client.create_check_run(REPO, {"name": "roofwatch", "head_sha": SHA, "status": "queued"})
    assert fake_github.tokens_minted == 1
    assert fake_github.violations == []
    with pytest.raises(GitHubError, match="installation id"):
        GitHubClient(fake_github.url, app=app)


@pytest.fixture
def outbox_env(roofwatch_env: Path, fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from support.environment import _reset_caches

    monkeypatch.setenv("ROOFWATCH_GITHUB_TOKEN", FakeGitHub.STATIC_TOKEN)
    monkeypatch.setenv("ROOFWATCH_GITHUB_API_URL", fake_github.url)
    _reset_caches()
    from roofwatch.service.core.db import migrate, session_scope
    from roofwatch.service.records.repositories import register

    migrate()
    with session_scope() as session:
        return register(session, REPO, "/nonexistent").id


def _fast_client(settings, repository):  # type: ignore[no-untyped-def]
    return GitHubClient(settings.github_api_url, token=settings.github_token, attempts=2, backoff=0.01)


def test_a_report_survives_an_outage_and_only_the_newest_state_is_posted(outbox_env: int,
                                                                        fake_github: FakeGitHub) -> None:
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import GitHubReport, Repository
    from roofwatch.service.github import outbox

    fake_github.down()
    with session_scope() as session:
        repository = session.get(Repository, outbox_env)
        row = outbox.publish(session, repository, "status", SHA, _status("pending"))
        assert row is not None
        report_id = row.id
    assert outbox.deliver(report_id, _fast_client) is False
    with session_scope() as session:
        repository = session.get(Repository, outbox_env)
        outbox.publish(session, repository, "status", SHA, _status("success"))  # the run finished meanwhile
        pending = session.get(GitHubReport, report_id)
        assert pending is not None and pending.attempts == 0 and pending.version == 2
    assert outbox.deliver(report_id, _fast_client) is False
    with session_scope() as session:
        failed = session.get(GitHubReport, report_id)
        assert failed is not None and failed.attempts == 1 and "503" in failed.last_error
        assert outbox.due(session) == []  # backing off
        failed.next_attempt_at = failed.updated_at  # time passes
        session.add(failed)
    fake_github.up()
    assert outbox.deliver_due(_fast_client) == (1, 0)
    assert [s["state"] for s in fake_github.statuses(REPO, SHA)] == ["success"]  # never the stale "pending"
    assert outbox.deliver_due(_fast_client) == (0, 0)


def test_the_comment_is_found_by_its_marker_and_edited_not_duplicated(outbox_env: int,
                                                                      fake_github: FakeGitHub) -> None:
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import GitHubReport, Repository
    from roofwatch.service.github import outbox

    fake_github.add_comment(REPO, 12, "LGTM", user="reviewer")
    fake_github.add_comment(REPO, 12, f"{MARKER}\nan old report", user="roofwatch[bot]")  # e.g. before a DB restore
    for body in ("first verdict", "second verdict"):
        with session_scope() as session:
            row = outbox.publish(session, session.get(Repository, outbox_env), "comment", "12",
                                 {"body": f"{MARKER}\n{body}"})
            assert row is not None
            report_id = row.id
        assert outbox.deliver(report_id, _fast_client)
    bodies = [c["body"] for c in fake_github.comments(REPO, 12)]
    assert bodies == ["LGTM", f"{MARKER}\nsecond verdict"]
    assert fake_github.calls("issues/create-comment") == []
    with session_scope() as session:
        stored = session.exec(select(GitHubReport)).one()
        assert stored.external_id and stored.delivered_version == stored.version == 2
    assert fake_github.violations == []
