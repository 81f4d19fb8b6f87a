"""How a webhook body is taken in: signature first, size counted while streaming, few bodies at once.

Against a real uvicorn server on loopback (the test client hands the app a whole body at once),
with raw sockets where the point is what the server does before the client has sent the body.
Also: the delivery's record is committed before its work is queued.
"""

from __future__ import annotations

import json
import socket
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlmodel import select
from support.github_support import SECRET, deliver, example, webhook_client
from support.live_server import serving

from roofwatch.service.core import embedded
from roofwatch.service.github.signature import sign

MAX_BYTES = 16 * 1024 * 1024
MAX_CONCURRENT = 2
PING = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()
CHUNK = b" " * (64 * 1024)


@dataclass
class Served:
    app: FastAPI
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/webhooks/github"

    def slots_in_use(self) -> int:
        slots = getattr(self.app.state, "webhook_body_slots", None)
        return slots.in_use if slots is not None else 0


def _deliveries() -> list[tuple[str, str]]:
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import WebhookDelivery

    with session_scope() as session:
        return [(d.delivery_id, d.outcome) for d in session.exec(select(WebhookDelivery)).all()]


def _wait_for(condition: object, what: str) -> None:
    """Wait until ``condition()`` holds; the deadline only turns a hang into a failure."""
    deadline = time.monotonic() + 30
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.fixture
def served(roofwatch_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    from support.environment import _reset_caches

    monkeypatch.setenv("ROOFWATCH_GITHUB_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("ROOFWATCH_WEBHOOK_MAX_BYTES", str(MAX_BYTES))
    monkeypatch.setenv("ROOFWATCH_WEBHOOK_MAX_CONCURRENT", str(MAX_CONCURRENT))
    _reset_caches()
    from roofwatch.service.api.app import create_app
    from roofwatch.service.core.db import migrate

    migrate()
    app = create_app()
    with serving(app, start_timeout=30, stop_timeout=30) as url:
        yield Served(app, int(url.rsplit(":", 1)[1]))
    assert embedded.MEASURE.drain(60)


def _headers(delivery: str, signature: str | None, length: int | None) -> dict[str, str]:
    headers = {"X-GitHub-Event": "ping", "X-GitHub-Delivery": delivery, "Content-Type": "application/json"}
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    if length is not None:
        headers["Content-Length"] = str(length)
    return headers


def _open(port: int, headers: dict[str, str], body: bytes = b"") -> socket.socket:
    """A POST whose headers (and ``body``, perhaps part of what Content-Length announces) are sent."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    head = "POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
    sock.sendall(head.encode() + body)
    return sock


def _answer(sock: socket.socket) -> tuple[int, dict[str, str], str]:
    """Status, headers (lower-case names) and body of the response on ``sock``; closes it."""
    data = b""
    with sock:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            assert chunk, f"connection closed before a response: {data!r}"
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        status_line, *lines = head.decode().split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
        length = int(headers.get("content-length", "0"))
        while len(rest) < length:
            chunk = sock.recv(65536)
            assert chunk, "connection closed inside the response body"
            rest += chunk
    return int(status_line.split()[1]), headers, rest[:length].decode()


@pytest.mark.parametrize("signature", [None, "", "sha1=" + "0" * 40, "sha256=not-hex"],
                         ids=["no header", "empty", "sha1", "not hex"])
def test_an_unsigned_delivery_is_refused_before_its_body_is_sent(served: Served, signature: str | None) -> None:
    # Ten megabytes announced, none sent: the answer can only come from the headers.
    sock = _open(served.port, _headers("unsigned", signature, 10_000_000))
    status, _, body = _answer(sock)
    assert status == 401 and "X-Hub-Signature-256" in body
    assert _deliveries() == []


def test_a_declared_size_over_the_limit_is_refused_before_the_body_is_sent(served: Served) -> None:
    sock = _open(served.port, _headers("too-big", "sha256=" + "0" * 64, MAX_BYTES + 1))
    status, _, body = _answer(sock)
    assert status == 413 and f"{MAX_BYTES}-byte limit" in body


def test_a_body_over_the_limit_without_content_length_is_413(served: Served) -> None:
    def body() -> Iterator[bytes]:
        yield b'{"zen": "'
        for _ in range(MAX_BYTES // len(CHUNK) + 1):
            yield CHUNK
        yield b'"}'

    # A streamed body goes out chunked: no Content-Length to trust, the server has to count.
    with httpx.Client(timeout=60) as client:
        response = client.post(served.url, content=body(), headers=_headers("chunked", "sha256=" + "0" * 64, None))
    assert response.request.headers.get("transfer-encoding") == "chunked"
    assert response.status_code == 413 and f"{MAX_BYTES}-byte limit" in response.text
    assert _deliveries() == []


def test_a_big_body_with_a_wrong_signature_is_never_held_whole_in_memory(served: Served) -> None:
    size = 12 * 1024 * 1024

    def body() -> Iterator[bytes]:
        yield b'{"zen": "'
        for _ in range(size // len(CHUNK)):
            yield CHUNK
        yield b'"}'

    tracemalloc.start()
    try:
        with httpx.Client(timeout=60) as client:
            response = client.post(served.url, content=body(),
                                   headers=_headers("forged", sign("not the secret", b"{}"), None))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 401
    # Read into memory whole, the body alone would be 12 MiB; streamed, only chunks and the spool's first MiB.
    assert peak < 4 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB while a 12 MiB body was read"
    assert _deliveries() == []


def test_bodies_read_at_once_are_capped_and_the_rest_answered_503(served: Served) -> None:
    body = PING
    stalled = []
    for index in range(MAX_CONCURRENT):
        delivery = f"slow-{index}"
        # Half of each body is sent; the server holds a slot while it waits for the rest.
        stalled.append((_open(served.port, _headers(delivery, sign(SECRET, body), len(body)), body[:10]), delivery))
    _wait_for(lambda: served.slots_in_use() == MAX_CONCURRENT, "the slow bodies to take every slot")

    refused = httpx.post(served.url, content=body, headers=_headers("one-too-many", sign(SECRET, body), None),
                         timeout=60)
    assert refused.status_code == 503
    assert int(refused.headers["retry-after"]) > 0
    assert f"{MAX_CONCURRENT} webhook bodies are being read" in refused.json()["detail"]

    for sock, _ in stalled:
        sock.sendall(body[10:])
    for sock, delivery in stalled:
        status, _, text = _answer(sock)
        assert status == 202 and json.loads(text)["delivery"] == delivery
    assert served.slots_in_use() == 0
    after = httpx.post(served.url, content=body, headers=_headers("after", sign(SECRET, body), None), timeout=60)
    assert after.status_code == 202
    assert sorted(_deliveries()) == [("after", "ignored"), ("slow-0", "ignored"), ("slow-1", "ignored")]


# -- the record and the queue ------------------------------------------------------------------


@pytest.fixture
def client(roofwatch_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    from support.environment import _reset_caches

    monkeypatch.setenv("ROOFWATCH_GITHUB_WEBHOOK_SECRET", SECRET)
    _reset_caches()
    with webhook_client("Codertocat/Hello-World", tmp_path / "empty-mirror") as test_client:
        yield test_client


def _push(shared_corpus: Path) -> dict[str, object]:
    payload = example(shared_corpus, "push/with-new-branch.payload.json")
    payload["ref"] = "refs/heads/master"
    return payload


def test_the_record_is_committed_before_its_work_is_queued(client: TestClient, shared_corpus: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    seen_when_queued: list[list[tuple[str, str]]] = []
    submit = embedded.MEASURE.submit

    def watching_submit(work, key=None):  # type: ignore[no-untyped-def]
        # Another connection sees committed rows only: what a worker or the measuring lane would find.
        seen_when_queued.append(_deliveries())
        return submit(work, key)

    monkeypatch.setattr(embedded.MEASURE, "submit", watching_submit)
    response = deliver(client, "push", _push(shared_corpus), delivery="ordered")
    assert response.status_code == 202 and response.json()["outcome"] == "accepted"
    assert seen_when_queued == [[("ordered", "accepted")]]
    assert embedded.MEASURE.drain(120)
    assert _deliveries() == [("ordered", "failed")]  # the empty directory is no repository: recorded, not lost


def test_work_that_cannot_be_queued_is_a_503_and_leaves_no_record(client: TestClient, shared_corpus: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def broker_down(work, key=None):  # type: ignore[no-untyped-def]
        raise ConnectionError("broker unreachable")

    with monkeypatch.context() as patch:
        patch.setattr(embedded.MEASURE, "submit", broker_down)
        refused = deliver(client, "push", _push(shared_corpus), delivery="redelivered")
    assert refused.status_code == 503 and "ConnectionError" in refused.json()["detail"]
    assert _deliveries() == []
    # GitHub's redelivery of the same delivery is new work, not a duplicate.
    again = deliver(client, "push", _push(shared_corpus), delivery="redelivered")
    assert again.status_code == 202 and again.json()["outcome"] == "accepted"
