"""Write endpoints: the token is checked before any byte of the body is read, bodies are bounded,
and an upload token uploads results for its own repository and does nothing else."""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from support.sample_repo import commit, init
from support.tests_support import roofwatch

ADMIN = "admin-token-for-writes-test"
MIB = 1024 * 1024
BENCH = '{"benchmarks": [{"name": "test_x", "stats": {"median": 0.001, "mean": 0.001, "min": 0.001, "rounds": 3}}]}'


class Body:
    """A streamed request body that counts how much of it the server asked for."""

    def __init__(self, size: int, chunk: int = 64 * 1024) -> None:
        self.left, self.chunk, self.sent = size, chunk, 0

    def __iter__(self) -> Iterator[bytes]:
        while self.left > 0:
            piece = b" " * min(self.chunk, self.left)
            self.left -= len(piece)
            self.sent += len(piece)
            yield piece


@pytest.fixture
def setup(roofwatch_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, object]]:
    from support.environment import _reset_caches

    monkeypatch.setenv("ROOFWATCH_API_TOKEN", ADMIN)
    _reset_caches()
    from roofwatch.service.api.app import create_app
    from roofwatch.service.core.db import migrate, session_scope
    from roofwatch.service.records import upload_tokens
    from roofwatch.service.records.repositories import register

    shas = {}
    for name in ("mine", "theirs"):
        repo = tmp_path / name
        init(repo)
        shas[name] = commit(repo, "Add work", {"kernel.py": "X = 1\n"}, 1)
    migrate()
    with session_scope() as session:
        mine = register(session, "acme/mine", str(tmp_path / "mine"), "main")
        register(session, "acme/theirs", str(tmp_path / "theirs"), "main")
        _, token = upload_tokens.issue(session, mine, "ci")
    with TestClient(create_app()) as client:
        yield {"client": client, "token": token, "shas": shas}
    _reset_caches()


def test_a_write_without_a_token_is_refused_before_its_body_is_read(setup: dict[str, object]) -> None:
    client = setup["client"]
    assert isinstance(client, TestClient)
    for method, url in (("PATCH", "/api/changes/1"), ("POST", "/api/results?repo=acme/mine&commit=x"),
                        ("PUT", "/api/repositories/acme/mine/suites")):
        body = Body(160 * MIB)
        answer = client.request(method, url, content=body, headers={"Content-Type": "application/json"})
        assert answer.status_code == 401 and body.sent <= 64 * 1024, (method, url, body.sent)
        wrong = client.request(method, url, content=b"{}", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401


def streamed(base: str, method: str, path: str, token: str, total: int) -> tuple[int, int]:
    """Send a chunked body of ``total`` bytes to a real server until it answers: (status, bytes sent)."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
                           "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
        chunk, sent = 64 * 1024, 0
        try:
            while sent < total and not select.select([connection], [], [], 0)[0]:
                connection.sendall(f"{chunk:x}\r\n".encode() + b" " * chunk + b"\r\n")
                sent += chunk
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = connection.recv(4096)
    return int(answer.split()[1]), sent


def test_bodies_over_the_limit_are_refused_as_they_arrive(setup: dict[str, object]) -> None:
    from support.live_server import serving

    from roofwatch.service.api.app import create_app

    client = setup["client"]
    assert isinstance(client, TestClient)
    auth = {"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"}
    declared = client.patch("/api/changes/1", content=b"x" * (65 * 1024), headers=auth)
    assert declared.status_code == 413
    with serving(create_app()) as base:
        # Socket buffers take a few MiB before the server reads; the rest is never sent.
        for path, total in (("/api/changes/1", 64 * MIB), ("/api/repositories/acme/mine/suites", 64 * MIB),
                            ("/api/results?repo=acme/mine&commit=x", 256 * MIB)):
            status, sent = streamed(base, "PUT" if "suites" in path else "PATCH" if "changes" in path else "POST",
                                    path, ADMIN, total)
            assert status == 413 and sent < total // 2, (path, status, sent)


def test_an_upload_token_uploads_for_its_repository_only(setup: dict[str, object]) -> None:
    client, token, shas = setup["client"], setup["token"], setup["shas"]
    assert isinstance(client, TestClient) and isinstance(shas, dict)
    auth = {"Authorization": f"Bearer {token}"}
    stored = client.post(f"/api/results?repo=acme/mine&commit={shas['mine']}&device_class=CI", content=BENCH,
                         headers=auth)
    assert stored.status_code == 200, stored.text
    other = client.post(f"/api/results?repo=acme/theirs&commit={shas['theirs']}&device_class=CI", content=BENCH,
                        headers=auth)
    assert other.status_code == 403
    unknown = client.post("/api/results?repo=acme/nobody&commit=abc&device_class=CI", content=BENCH, headers=auth)
    assert unknown.status_code == 403  # an upload token learns nothing about other names
    suites = client.put("/api/repositories/acme/mine/suites", content=b'[[tool.roofwatch.suites]]\n', headers=auth)
    assert suites.status_code == 403 and "admin token" in suites.json()["detail"]
    triage = client.patch("/api/changes/1", json={"state": "invalid"}, headers=auth)
    assert triage.status_code == 403


def test_a_revoked_upload_token_is_refused(setup: dict[str, object]) -> None:
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.records import upload_tokens
    from roofwatch.service.records.repositories import find_repository

    client, token, shas = setup["client"], setup["token"], setup["shas"]
    assert isinstance(client, TestClient) and isinstance(shas, dict)
    with session_scope() as session:
        mine = find_repository(session, "acme/mine")
        [row] = upload_tokens.listed(session, mine)
        assert upload_tokens.revoke(session, mine, row.id)  # type: ignore[arg-type]
    answer = client.post(f"/api/results?repo=acme/mine&commit={shas['mine']}&device_class=CI", content=BENCH,
                         headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 401


def test_a_stored_config_with_paths_outside_the_repository_is_refused(setup: dict[str, object]) -> None:
    client = setup["client"]
    assert isinstance(client, TestClient)
    auth = {"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/toml"}
    for key, value in (("suite_paths", '["/etc"]'), ("suite_paths", '["bench/../../x"]'),
                       ("setup_inputs", '["../../secret"]'), ("setup_inputs", '["/etc/shadow"]')):
        extra = 'suites_from = "main"\n' if key == "suite_paths" else 'setup = "true"\n'
        toml = f'[[tool.roofwatch.suites]]\nname = "b"\nkind = "benchmark"\ncommand = "x"\n{extra}{key} = {value}\n'
        answer = client.put("/api/repositories/acme/mine/suites", content=toml.encode(), headers=auth)
        assert answer.status_code == 422, (key, value, answer.text)
        assert "absolute" in answer.text or "leaves the repository" in answer.text


def test_token_commands_make_list_and_revoke(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    init(repo)
    commit(repo, "Add work", {"kernel.py": "X = 1\n"}, 1)
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data")}
    roofwatch(["repo", "add", "acme/cli", "--clone-url", str(repo)], env)
    made = roofwatch(["token", "add", "--repo", "acme/cli", "--label", "nightly CI"], env)
    token = made.stdout.strip()
    assert token.startswith("rwu_") and len(token) > 40 and token not in made.stderr
    listed = roofwatch(["token", "list", "--repo", "acme/cli"], env)
    assert "nightly CI" in listed.stdout and token not in listed.stdout
    roofwatch(["token", "revoke", "1", "--repo", "acme/cli"], env)
    again = roofwatch(["token", "revoke", "1", "--repo", "acme/cli"], env, check=False)
    assert again.returncode == 2 and "no live upload token 1" in again.stderr
