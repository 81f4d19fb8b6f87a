"""Long text from clients through a real ``roofwatch serve``: redacted whole, and nobody waits for it.

Every access-log line, every uploaded string and every stored suite text is redacted while the
interpreter is held, so each request's cost must stay linear in what it sent: a 120,000-letter
query string once held the whole server for 16 s, an upload token's 200,000-letter benchmark
name for 45 s. Here a 500,000-letter name would take minutes at that rate; each request has two.
"""

from __future__ import annotations

import json
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from sqlmodel import col, func, select
from support.sample_repo import commit, init
from support.served import roofwatch_serving

LETTERS_IN_QUERY = 120_000  # about what one read of loopback delivers; h11 refuses a longer request line whole
LETTERS_IN_NAME = 500_000
CREDENTIAL = "https://ci:hunter2hunter2@git.example.com/acme.git"


def raw_get(url: str, target: str, timeout: float) -> int:
    """GET ``target`` over a socket of its own (httpx refuses URLs this long); the status code."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as connection:
        connection.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        return int(connection.recv(64).split(b" ")[1])


def test_long_texts_are_redacted_whole_while_other_clients_are_served(roofwatch_env: Path, tmp_path: Path) -> None:
    from roofwatch.service.core.db import migrate, session_scope
    from roofwatch.service.core.models import Benchmark
    from roofwatch.service.records import upload_tokens
    from roofwatch.service.records.repositories import register

    repo = tmp_path / "repo"
    init(repo)
    sha = commit(repo, "Work", {"kernel.py": "X = 1\n"}, 1)
    migrate()
    with session_scope() as session:
        repository = register(session, "acme/long", str(repo), "main")
        _, token = upload_tokens.issue(session, repository, "ci")
    results = {"context": {"host_name": "ci"}, "benchmarks": [
        {"name": "BM_copy/" + "a" * LETTERS_IN_NAME + f"/{CREDENTIAL}", "run_type": "iteration", "iterations": 10,
         "real_time": 12.5, "cpu_time": 12.5, "time_unit": "us"}]}
    query = "a" * LETTERS_IN_QUERY

    with roofwatch_serving({"ROOFWATCH_DATA_DIR": str(roofwatch_env)}, tmp_path / "serve.log") as url:
        with ThreadPoolExecutor(3) as pool:
            upload = pool.submit(httpx.post, f"{url}/api/results", timeout=120, content=json.dumps(results),
                                 params={"repo": "acme/long", "commit": sha, "device_class": "CI"},
                                 headers={"Authorization": f"Bearer {token}"})
            long_query = pool.submit(raw_get, url, f"/healthz?q={query}&from={CREDENTIAL}", 120)
            other = pool.submit(httpx.get, f"{url}/api/runs", timeout=120)
            assert other.result().status_code == 200
            assert long_query.result() == 200
            stored = upload.result()
        assert stored.status_code == 200, stored.text[:2000]
        assert httpx.get(f"{url}/api/runs", timeout=30).status_code == 200  # still serving

    log = (tmp_path / "serve.log").read_text()
    assert f'"GET /healthz?q={query}&from=https://***@git.example.com/acme.git HTTP/1.1" 200' in log
    assert "hunter2hunter2" not in log
    with session_scope() as session:
        names = session.exec(select(Benchmark.name)).all()
        longest = session.exec(select(func.max(func.length(col(Benchmark.name))))).one()
    assert len(names) == 1 and names[0].startswith("BM_copy/aaaa") and "hunter2hunter2" not in names[0]
    assert longest is not None and longest <= 1024

