"""Unauthenticated and hostile requests on SQLite and PostgreSQL: a clear 4xx, never a 500.

NULs in query strings and paths, ids past 32 bits, a signed webhook whose fields hold a NUL,
well-formed result files with the wrong types, and triage of a change nobody can see yet.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from support.github_support import SECRET, deliver, example
from support.sample_repo import commit, init

from roofwatch.result_files.uploads import UploadFormatError, read_results

ADMIN = "admin-token-for-hostile-requests"


@pytest.fixture
def client(database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    from support.environment import _reset_caches

    monkeypatch.setenv("ROOFWATCH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ROOFWATCH_DATABASE_URL", database_url)
    monkeypatch.delenv("ROOFWATCH_BROKER_URL", raising=False)
    monkeypatch.setenv("ROOFWATCH_API_TOKEN", ADMIN)
    monkeypatch.setenv("ROOFWATCH_GITHUB_WEBHOOK_SECRET", SECRET)
    _reset_caches()
    from roofwatch.service.api.app import create_app
    from roofwatch.service.core import embedded
    from roofwatch.service.core.db import migrate

    migrate()
    with TestClient(create_app()) as test_client:
        yield test_client
    assert embedded.MEASURE.drain(60)
    _reset_caches()


READ_ROUTES = ["/api/runs", "/api/benchmarks", "/api/changes", "/", "/changes", "/roofline"]


@pytest.mark.parametrize("url", [
    *(f"{route}?repo=%00" for route in READ_ROUTES),
    "/api/runs?repo=acme%00/x", "/?kernel=%00&suite=%00&device=%00", "/api/runs/%00",
])
def test_a_nul_in_a_url_is_a_clear_422(client: TestClient, url: str) -> None:
    answer = client.get(url)
    assert answer.status_code == 422, answer.text


@pytest.mark.parametrize("url", ["/api/runs/2147483648", "/api/benchmarks/9223372036854775807/series",
                                 "/api/comparisons/2147483648", "/runs/2147483648", "/compare/2147483648"])
def test_ids_past_the_columns_are_a_clear_422(client: TestClient, url: str) -> None:
    assert client.get(url).status_code == 422


def test_triage_of_an_id_past_the_column_is_a_422(client: TestClient) -> None:
    answer = client.patch("/api/changes/2147483648", json={"state": "invalid"},
                          headers={"Authorization": f"Bearer {ADMIN}"})
    assert answer.status_code == 422


def test_a_signed_webhook_with_a_nul_is_recorded(client: TestClient, shared_corpus: Path) -> None:
    payload = example(shared_corpus, "pull_request/opened.payload.json")
    payload["action"] = "open\u0000ed"
    payload["pull_request"]["title"] = "title\u0000"
    answer = deliver(client, "pull_request", payload)
    assert answer.status_code in (200, 202), answer.text


# Well-formed JSON with the wrong types: each one is the file's fault, said as such.
WRONG_TYPES = {
    "google-time-unit-list": {"context": {}, "benchmarks": [{"name": "f", "run_type": "iteration",
                                                             "real_time": 1.0, "time_unit": ["ns"]}]},
    "google-real-time-true": {"context": {}, "benchmarks": [{"name": "f", "real_time": True, "time_unit": "ns"}]},
    "google-negative": {"context": {}, "benchmarks": [{"name": "f", "real_time": -1.0, "time_unit": "ns"}]},
    "pytest-benchmark-nan": {"benchmarks": [{"name": "t", "stats": {"median": float("nan"), "mean": 1.0}}]},
    "pytest-benchmark-zero": {"benchmarks": [{"name": "t", "stats": {"median": 0, "mean": 0}}]},
    "pytest-benchmark-extra-list": {"benchmarks": [{"name": "t", "stats": {"median": 1.0, "mean": 1.0},
                                                    "extra_info": [1, 2]}]},
    "pytest-benchmark-name-object": {"benchmarks": [{"name": {"a": 1}, "stats": {"median": 1.0, "mean": 1.0}}]},
}


@pytest.mark.parametrize("name", sorted(WRONG_TYPES))
def test_result_files_with_wrong_types_are_refused_with_a_reason(tmp_path: Path, name: str) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(WRONG_TYPES[name]))
    with pytest.raises(UploadFormatError):
        read_results(path, device_class="CI")


@pytest.mark.parametrize("text", ['{"benchmarks": ' + "[" * 100_000 + "]" * 100_000 + "}",
                                  '{"benchmarks": [{"name": "t", "stats": {"median": ' + "9" * 5000 + "}}]}"])
def test_unreadable_json_is_refused_not_crashed_on(tmp_path: Path, text: str) -> None:
    path = tmp_path / "results.json"
    path.write_text(text)
    with pytest.raises(UploadFormatError):
        read_results(path, device_class="CI")


def test_an_upload_with_wrong_types_is_a_400(client: TestClient, tmp_path: Path) -> None:
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.records.repositories import register

    repo = tmp_path / "repo"
    init(repo)
    sha = commit(repo, "Work", {"kernel.py": "X = 1\n"}, 1)
    with session_scope() as session:
        register(session, "acme/hostile-upload", str(repo), "main")
    for name, content in WRONG_TYPES.items():
        answer = client.post(f"/api/results?repo=acme/hostile-upload&commit={sha}&device_class=CI",
                             content=json.dumps(content), headers={"Authorization": f"Bearer {ADMIN}"})
        assert answer.status_code == 400, (name, answer.text)


def test_a_candidate_change_is_not_triaged(client: TestClient, tmp_path: Path) -> None:
    """A change still a candidate is nobody's to triage: 404, and its state stays as it was."""
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import Change
    from roofwatch.service.records.repositories import register

    repo = tmp_path / "repo"
    init(repo)
    commit(repo, "Work", {"kernel.py": "X = 1\n"}, 1)
    with session_scope() as session:
        repository = register(session, "acme/candidates", str(repo), "main")
        change = Change(repository_id=repository.id, kind="perf-regression", phase="candidate")  # type: ignore[arg-type]
        session.add(change)
        session.flush()
        change_id = change.id
    answer = client.patch(f"/api/changes/{change_id}", json={"state": "invalid"},
                          headers={"Authorization": f"Bearer {ADMIN}"})
    assert answer.status_code == 404
    with session_scope() as session:
        stored = session.get(Change, change_id)
        assert stored is not None and stored.state == "new"


@pytest.mark.parametrize("fmt", ["google-benchmark", "pytest-benchmark"])
def test_a_file_with_more_benchmarks_than_the_limit_is_refused_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    from support.environment import _reset_caches

    monkeypatch.setenv("ROOFWATCH_MAX_BENCHMARKS", "3")
    _reset_caches()
    if fmt == "google-benchmark":
        content = {"context": {}, "benchmarks": [{"name": f"BM_{i}", "real_time": 1.0, "time_unit": "ns"}
                                                 for i in range(4)]}
    else:
        content = {"benchmarks": [{"name": f"t{i}", "stats": {"median": 1.0, "mean": 1.0}} for i in range(4)]}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(content))
    try:
        with pytest.raises(UploadFormatError, match=r"more than (the )?3 .*ROOFWATCH_MAX_BENCHMARKS"):
            read_results(path, device_class="CI")
        content["benchmarks"].pop()
        path.write_text(json.dumps(content))
        assert len(read_results(path, device_class="CI").measurements) == 3
    finally:
        monkeypatch.delenv("ROOFWATCH_MAX_BENCHMARKS")
        _reset_caches()
