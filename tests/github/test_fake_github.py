"""The fake GitHub server: it serves the flows roofwatch needs and refuses what the real GitHub would refuse.

Every test talks HTTP to the running fake with httpx, as roofwatch's client does. The refusal tests are what make
the fake worth having: each one fails if the corresponding check in ``fake_github.py`` stops working.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from support.fake_github import SECONDARY_RATE_LIMIT, FakeGitHub, Reply

REPO = "octo-org/kernels"
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
GITHUB_HEADERS = {"Accept": "application/vnd.github+json", "User-Agent": "roofwatch-tests",
                  "X-GitHub-Api-Version": "2022-11-28"}


def client(fake: FakeGitHub, token: str | None = FakeGitHub.STATIC_TOKEN, **headers: str) -> httpx.Client:
    """A client that behaves: GitHub's media type, a User-Agent, the API version, and a token."""
    merged = dict(GITHUB_HEADERS)
    if token is not None:
        merged["Authorization"] = f"Bearer {token}"
    merged.update(headers)
    return httpx.Client(base_url=fake.url, headers=merged, timeout=10)


def rsa_key() -> tuple[bytes, bytes]:
    """A fresh RSA key pair (private PEM, public PEM), as a GitHub App's would be."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public


def app_jwt(private_pem: bytes, app_id: int | str, lifetime: int = 540, **claims: Any) -> str:
    now = int(time.time())
    payload = {"iat": now - 60, "exp": now - 60 + lifetime, "iss": str(app_id), **claims}
    return jwt.encode(payload, private_pem, algorithm="RS256")


# -- statuses and the request checks -------------------------------------------------------------------------------


def test_valid_status_is_stored_and_answered_like_github(fake_github: FakeGitHub) -> None:
    with client(fake_github) as http:
        # target_url null is allowed only through OpenAPI's `nullable` — a naive JSON Schema reading rejects it.
        response = http.post(f"/repos/{REPO}/statuses/{SHA}", json={
            "state": "success", "description": "no regression", "target_url": None, "context": "roofwatch"})

    assert response.status_code == 201, response.text
    body = response.json()
    assert {"id", "state", "description", "target_url", "context", "created_at", "updated_at", "url"} <= body.keys()
    assert (body["state"], body["context"], body["target_url"]) == ("success", "roofwatch", None)
    assert response.headers["location"] == body["url"]
    assert fake_github.statuses(REPO, SHA) == [body]
    assert fake_github.statuses(REPO.upper(), SHA) == [body]  # owner/repo are case-insensitive on GitHub
    assert fake_github.violations == []
    recorded = fake_github.calls("repos/create-commit-status")
    assert [(r.method, r.status, r.body["state"]) for r in recorded] == [("POST", 201, "success")]
    assert recorded[0].headers["user-agent"] == "roofwatch-tests"


def test_state_outside_the_enum_is_a_violation_and_422(fake_github: FakeGitHub) -> None:
    with client(fake_github) as http:
        response = http.post(f"/repos/{REPO}/statuses/{SHA}", json={"state": "neutral", "context": "roofwatch"})

    assert response.status_code == 422
    assert response.json()["message"] == "Validation Failed"
    assert response.json()["errors"][0]["field"] == "state"
    assert len(fake_github.violations) == 1 and "'neutral' is not one of" in fake_github.violations[0]
    assert fake_github.statuses(REPO, SHA) == []


def test_body_that_is_not_json_is_a_violation(fake_github: FakeGitHub) -> None:
    with client(fake_github) as http:
        response = http.post(f"/repos/{REPO}/statuses/{SHA}", content=b"state=success",
                             headers={"Content-Type": "application/x-www-form-urlencoded"})

    assert response.status_code == 400
    assert "not JSON" in fake_github.violations[0]


def test_missing_authorization_is_401_and_a_violation(fake_github: FakeGitHub) -> None:
    with client(fake_github, token=None) as http:
        response = http.post(f"/repos/{REPO}/statuses/{SHA}", json={"state": "success"})

    assert response.status_code == 401
    assert response.json()["message"] == "Requires authentication"
    assert fake_github.violations == [f"POST /repos/{REPO}/statuses/{SHA}: no Authorization header"]
    assert fake_github.statuses(REPO, SHA) == []


def test_unknown_token_is_401_but_not_a_client_bug(fake_github: FakeGitHub) -> None:
    with client(fake_github, token="ghp_not_a_token_github_ever_issued") as http:
        response = http.post(f"/repos/{REPO}/statuses/{SHA}", json={"state": "success"})

    assert (response.status_code, response.json()["message"]) == (401, "Bad credentials")
    assert fake_github.violations == []


def test_missing_user_agent_is_refused_like_github(fake_github: FakeGitHub) -> None:
    with client(fake_github) as http:
        del http.headers["User-Agent"]  # httpx would otherwise send python-httpx/x.y
        response = http.post(f"/repos/{REPO}/statuses/{SHA}", json={"state": "success"})

    assert response.status_code == 403
    assert "User-Agent" in fake_github.violations[0]


def test_generic_accept_is_served_but_is_a_violation(fake_github: FakeGitHub) -> None:
    with client(fake_github, Accept="*/*") as http:  # httpx's default
        response = http.post(f"/repos/{REPO}/statuses/{SHA}", json={"state": "success"})

    assert response.status_code == 201  # GitHub serves it too
    assert "Accept '*/*'" in fake_github.violations[0]


def test_unknown_route_is_404_and_a_violation(fake_github: FakeGitHub) -> None:
    with client(fake_github) as http:
        response = http.post(f"/repos/{REPO}/commits/{SHA}/statuses", json={"state": "success"})
        wrong_method = http.delete(f"/repos/{REPO}/check-runs/1")

    assert (response.status_code, wrong_method.status_code) == (404, 404)
    assert response.json()["message"] == "Not Found"
    assert len(fake_github.violations) == 2
    assert "no operation in the REST description" in fake_github.violations[0]
    assert "GET/PATCH" in fake_github.violations[1] or "PATCH/GET" in fake_github.violations[1]


def test_non_integer_path_parameter_is_404_and_a_violation(fake_github: FakeGitHub) -> None:
    with client(fake_github) as http:
        response = http.get(f"/repos/{REPO}/check-runs/latest")

    assert response.status_code == 404
    assert "check_run_id='latest'" in fake_github.violations[0]


def test_query_parameters_are_checked(fake_github: FakeGitHub) -> None:
    with client(fake_github) as http:
        bad_value = http.get(f"/repos/{REPO}/issues/1/comments", params={"per_page": "many"})
        unknown = http.get(f"/repos/{REPO}/issues/1/comments", params={"sort": "created"})
        naive_since = http.get(f"/repos/{REPO}/issues/1/comments", params={"since": "2024-05-01T12:00:00"})

    assert (bad_value.status_code, unknown.status_code, naive_since.status_code) == (422, 200, 422)
    assert [v.split(": ", 1)[1].split(" ", 3)[:3] for v in fake_github.violations] == [
        ["query", "parameter", "per_page='many':"], ["unknown", "query", "parameter"],
        ["query", "parameter", "since='2024-05-01T12:00:00':"]]


# -- check runs --------------------------------------------------------------------------------------------------


def test_check_run_lifecycle(fake_github: FakeGitHub) -> None:
    with client(fake_github) as http:
        created = http.post(f"/repos/{REPO}/check-runs", json={
            "name": "roofwatch", "head_sha": SHA, "status": "in_progress", "started_at": "2024-05-01T12:00:00Z"})
        run_id = created.json()["id"]
        updated = http.patch(f"/repos/{REPO}/check-runs/{run_id}", json={
            "conclusion": "failure", "output": {"title": "2 regressions", "summary": "matmul 8% slower"}})
        fetched = http.get(f"/repos/{REPO}/check-runs/{run_id}")
        elsewhere = http.get(f"/repos/octo-org/other/check-runs/{run_id}")

    assert created.status_code == 201 and run_id > 2**31  # ids outgrew int32 long ago
    assert updated.status_code == 200
    # "Providing conclusion will automatically set the status parameter to completed."
    assert (updated.json()["status"], updated.json()["conclusion"]) == ("completed", "failure")
    assert fetched.json() == updated.json() == fake_github.check_runs(REPO)[0]
    assert fetched.json()["output"]["summary"] == "matmul 8% slower"
    assert elsewhere.status_code == 404
    assert fake_github.violations == []  # includes the fake's own answers, checked against the response schemas


def test_check_run_rules_from_the_description(fake_github: FakeGitHub) -> None:
    with client(fake_github) as http:
        run_id = http.post(f"/repos/{REPO}/check-runs", json={"name": "roofwatch", "head_sha": SHA}).json()["id"]
        # The update schema's anyOf: status "completed" needs a conclusion.
        no_conclusion = http.patch(f"/repos/{REPO}/check-runs/{run_id}", json={"status": "completed"})
        # A naive timestamp (datetime.isoformat() without a zone) is not RFC 3339 date-time.
        naive = http.patch(f"/repos/{REPO}/check-runs/{run_id}", json={"started_at": "2024-05-01T12:00:00"})
        missing = http.patch(f"/repos/{REPO}/check-runs/{run_id + 1}", json={"status": "in_progress"})

    assert (no_conclusion.status_code, naive.status_code, missing.status_code) == (422, 422, 404)
    assert len(fake_github.violations) == 2
    assert "conclusion" in fake_github.violations[0] and "date-time" in fake_github.violations[1]
    assert fake_github.check_runs(REPO)[0]["status"] == "queued"


# -- issue comments ------------------------------------------------------------------------------------------------


def test_comment_pagination_follows_link_headers(fake_github: FakeGitHub) -> None:
    seeded = [fake_github.add_comment(REPO, 7, f"comment {i}")["id"] for i in range(64)]
    with client(fake_github) as http:
        seeded.append(http.post(f"/repos/{REPO}/issues/7/comments", json={"body": "roofwatch report"}).json()["id"])
        pages: list[httpx.Response] = [http.get(f"/repos/{REPO}/issues/7/comments", params={"per_page": 30})]
        while "next" in pages[-1].links:
            pages.append(http.get(pages[-1].links["next"]["url"]))

    assert [len(page.json()) for page in pages] == [30, 30, 5]
    assert [c["id"] for page in pages for c in page.json()] == seeded
    assert pages[0].links["last"]["url"].endswith("per_page=30&page=3")
    assert set(pages[1].links) == {"next", "last", "prev", "first"}
    assert set(pages[2].links) == {"prev", "first"}
    assert pages[2].json()[-1]["user"]["login"] == "roofwatch[bot]"
    assert fake_github.violations == []


def test_per_page_is_capped_at_100(fake_github: FakeGitHub) -> None:
    for i in range(101):
        fake_github.add_comment(REPO, 3, f"c{i}")
    with client(fake_github) as http:
        response = http.get(f"/repos/{REPO}/issues/3/comments", params={"per_page": 500})

    assert len(response.json()) == 100 and "next" in response.links


def test_comment_update_edits_in_place(fake_github: FakeGitHub) -> None:
    with client(fake_github) as http:
        created = http.post(f"/repos/{REPO}/issues/7/comments", json={"body": "first verdict"}).json()
        updated = http.patch(f"/repos/{REPO}/issues/comments/{created['id']}", json={"body": "second verdict"})
        missing = http.patch(f"/repos/{REPO}/issues/comments/{created['id'] + 1}", json={"body": "x"})
        empty = http.patch(f"/repos/{REPO}/issues/comments/{created['id']}", json={})

    assert updated.status_code == 200 and updated.json()["id"] == created["id"]
    assert [c["body"] for c in fake_github.comments(REPO, 7)] == ["second verdict"]
    assert (missing.status_code, empty.status_code) == (404, 422)
    assert len(fake_github.violations) == 1 and "'body' is a required property" in fake_github.violations[0]


# -- faults ----------------------------------------------------------------------------------------------------------


def test_fail_next_then_success(fake_github: FakeGitHub) -> None:
    fake_github.fail_next("repos/create-commit-status", 502)
    with client(fake_github) as http:
        first = http.post(f"/repos/{REPO}/statuses/{SHA}", json={"state": "pending"})
        second = http.post(f"/repos/{REPO}/statuses/{SHA}", json={"state": "pending"})

    assert (first.status_code, second.status_code) == (502, 201)
    assert [r.status for r in fake_github.calls("repos/create-commit-status")] == [502, 201]
    assert len(fake_github.statuses(REPO, SHA)) == 1
    assert fake_github.violations == []


def test_secondary_rate_limit_and_outage(fake_github: FakeGitHub) -> None:
    fake_github.fail_next("issues/create-comment", 403, times=2, headers={"retry-after": "1"},
                          body=SECONDARY_RATE_LIMIT)
    with client(fake_github) as http:
        limited = [http.post(f"/repos/{REPO}/issues/1/comments", json={"body": "x"}) for _ in range(2)]
        fake_github.down()
        during = http.post(f"/repos/{REPO}/issues/1/comments", json={"body": "x"})
        fake_github.up()
        after = http.post(f"/repos/{REPO}/issues/1/comments", json={"body": "x"})

    assert [r.status_code for r in limited] == [403, 403]
    assert limited[0].headers["retry-after"] == "1" and "secondary rate limit" in limited[0].json()["message"]
    assert (during.status_code, after.status_code) == (503, 201)
    assert len(fake_github.comments(REPO, 1)) == 1


def test_fail_next_rejects_unknown_operations(fake_github: FakeGitHub) -> None:
    with pytest.raises(ValueError):
        fake_github.fail_next("repos/create-status", 502)  # the real id is repos/create-commit-status


# -- GitHub App installation tokens ------------------------------------------------------------------------------


def test_app_jwt_mints_a_token_that_authorizes_requests(fake_github: FakeGitHub) -> None:
    private, public = rsa_key()
    fake_github.configure_app(4242, public)
    with client(fake_github, token=app_jwt(private, 4242)) as app:
        minted = app.post("/app/installations/99/access_tokens")
    assert minted.status_code == 201, minted.text
    token = minted.json()["token"]
    expires = datetime.fromisoformat(minted.json()["expires_at"].replace("Z", "+00:00"))
    assert token.startswith("ghs_") and minted.json()["expires_at"].endswith("Z")
    assert 3590 <= (expires - datetime.now(timezone.utc)).total_seconds() <= 3600

    with client(fake_github, token=token) as http:
        bearer = http.post(f"/repos/{REPO}/statuses/{SHA}", json={"state": "success"})
    with client(fake_github, token=None, Authorization=f"token {token}") as http:
        token_scheme = http.post(f"/repos/{REPO}/statuses/{SHA}", json={"state": "success"})

    assert (bearer.status_code, token_scheme.status_code) == (201, 201)
    assert fake_github.tokens_minted == 1
    assert fake_github.violations == []

    fake_github.revoke_token(token)
    with client(fake_github, token=token) as http:
        assert http.post(f"/repos/{REPO}/statuses/{SHA}", json={"state": "success"}).status_code == 401


def test_stateless_installation_tokens_are_longer_than_40_characters(fake_github: FakeGitHub) -> None:
    """GitHub's 2026 token format ("ghs_APPID_JWT") breaks clients that assume 40-character tokens."""
    private, public = rsa_key()
    fake_github.configure_app(4242, public)
    fake_github.stateless_tokens = True
    with client(fake_github, token=app_jwt(private, 4242)) as app:
        token = app.post("/app/installations/99/access_tokens").json()["token"]
    with client(fake_github, token=token) as http:
        response = http.post(f"/repos/{REPO}/statuses/{SHA}", json={"state": "success"})

    assert token.startswith("ghs_4242_") and len(token) > 40
    assert response.status_code == 201 and fake_github.violations == []


def test_app_jwt_signed_with_another_key_is_refused(fake_github: FakeGitHub) -> None:
    _, public = rsa_key()
    other_private, _ = rsa_key()
    fake_github.configure_app(4242, public)
    with client(fake_github, token=app_jwt(other_private, 4242)) as app:
        response = app.post("/app/installations/99/access_tokens")

    assert response.status_code == 401
    assert fake_github.tokens_minted == 0


def test_app_jwt_claims_are_checked(fake_github: FakeGitHub) -> None:
    private, public = rsa_key()
    fake_github.configure_app(4242, public)
    with client(fake_github, token=app_jwt(private, 4343)) as app:
        wrong_app = app.post("/app/installations/99/access_tokens")
    with client(fake_github, token=app_jwt(private, 4242, lifetime=3600)) as app:
        too_long = app.post("/app/installations/99/access_tokens")
    with client(fake_github, token=FakeGitHub.STATIC_TOKEN) as app:
        not_a_jwt = app.post("/app/installations/99/access_tokens")

    assert [r.status_code for r in (wrong_app, too_long, not_a_jwt)] == [401, 401, 401]
    assert fake_github.tokens_minted == 0
    assert len(fake_github.violations) == 2  # the wrong app id is a configuration error, not a request bug
    assert "3600 s after 'iat'" in fake_github.violations[0] and "not a JWT" in fake_github.violations[1]


def test_expired_installation_token_is_refused(fake_github: FakeGitHub) -> None:
    private, public = rsa_key()
    fake_github.configure_app(4242, public)
    fake_github.token_lifetime = timedelta(seconds=1)
    with client(fake_github, token=app_jwt(private, 4242)) as app:
        token = app.post("/app/installations/99/access_tokens").json()["token"]
    time.sleep(1.1)
    with client(fake_github, token=token) as http:
        response = http.post(f"/repos/{REPO}/statuses/{SHA}", json={"state": "success"})

    assert response.status_code == 401
    assert "expired" in fake_github.violations[0]


# -- pull requests -------------------------------------------------------------------------------------------------


def test_pull_request_shape(fake_github: FakeGitHub) -> None:
    fake_github.add_pull(REPO, 12, head_sha=SHA, head_ref="faster-matmul", base_ref="main", base_sha="a" * 40,
                         head_repo_full_name="contributor/kernels", user="contributor",
                         author_association="FIRST_TIME_CONTRIBUTOR", labels=["perf"])
    with client(fake_github) as http:
        pull = http.get(f"/repos/{REPO}/pulls/12")
        missing = http.get(f"/repos/{REPO}/pulls/13")

    assert pull.status_code == 200 and missing.status_code == 404
    body: dict[str, Any] = pull.json()
    assert (body["number"], body["state"], body["user"]["login"]) == (12, "open", "contributor")
    assert (body["head"]["sha"], body["head"]["ref"], body["head"]["repo"]["full_name"]) == (
        SHA, "faster-matmul", "contributor/kernels")
    assert body["head"]["repo"]["clone_url"] == "https://github.com/contributor/kernels.git"
    assert body["head"]["repo"]["fork"] is True
    assert (body["base"]["sha"], body["base"]["ref"], body["base"]["repo"]["full_name"]) == ("a" * 40, "main", REPO)
    assert [label["name"] for label in body["labels"]] == ["perf"]
    assert body["author_association"] == "FIRST_TIME_CONTRIBUTOR"
    assert fake_github.violations == []  # the answer validated against the pull-request response schema


def test_fake_checks_its_own_answers(fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shape check on answers is what lets ``violations == []`` above vouch for the response bodies too."""
    monkeypatch.setitem(fake_github._handlers, "checks/get", lambda call: Reply(200, {"id": "not-a-number"}))
    with client(fake_github) as http:
        http.get(f"/repos/{REPO}/check-runs/1")

    assert len(fake_github.violations) == 1
    assert "fake's own 200 answer for checks/get" in fake_github.violations[0]
    assert "'head_sha' is a required property" in fake_github.violations[0]


def test_reset_forgets_traffic_and_state(fake_github: FakeGitHub) -> None:
    with client(fake_github) as http:
        http.post(f"/repos/{REPO}/statuses/{SHA}", json={"state": "bogus"})
    fake_github.reset()
    assert (fake_github.requests, fake_github.violations, fake_github.statuses(REPO, SHA)) == ([], [], [])
