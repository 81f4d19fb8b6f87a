"""``GET``/``PUT /api/repositories/{owner}/{name}/suites`` on the real app and database.

A config stored through the API is validated as ``roofwatch repo set-suites`` validates a file,
kept as a new version, and is what the next ``roofwatch run`` of the repository uses.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from support.sample_repo import commit, init
from support.tests_support import roofwatch

URL = "/api/repositories/acme/legacy/suites"
AUTH = {"Authorization": "Bearer s3cret"}
TOML = {**AUTH, "Content-Type": "application/toml"}
SUITES = """\
[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest bench -q -p no:cacheprovider --benchmark-only --benchmark-min-rounds=3 --benchmark-max-time=0.01 --benchmark-warmup=off"
"""


@pytest.fixture
def client(roofwatch_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    from support.environment import _reset_caches

    monkeypatch.setenv("ROOFWATCH_API_TOKEN", "s3cret")
    _reset_caches()
    from roofwatch.service.api.app import create_app
    from roofwatch.service.core.db import migrate, session_scope
    from roofwatch.service.records.repositories import register

    repo = tmp_path / "legacy"
    init(repo)
    commit(repo, "Add work", {"kernel.py": "def work():\n    return sum(range(100))\n",
                              "bench/test_work.py": "from kernel import work\n\n\ndef test_work(benchmark):\n"
                                                    "    benchmark(work)\n"}, 1)
    migrate()
    with session_scope() as session:
        register(session, "acme/legacy", str(repo), "main")
    with TestClient(create_app()) as test_client:
        yield test_client
    _reset_caches()


def test_versions_are_kept_and_shown(client: TestClient) -> None:
    assert client.get(URL).json() == {"repository": "acme/legacy", "current": None, "override": None,
                                      "suites": [], "versions": []}
    first = client.put(URL + "?origin=suites.toml", content=SUITES, headers=TOML)
    assert first.status_code == 201, first.text
    assert first.json()["current"]["version"] == 1 and first.json()["current"]["origin"] == "suites.toml"
    assert (first.json()["override"], first.json()["suites"]) == (False, ["benchmarks"])

    again = client.put(URL + "?origin=suites.toml", content=SUITES, headers=TOML)
    assert again.status_code == 200 and len(again.json()["versions"]) == 1  # the same text: no new version

    override = "[tool.roofwatch]\noverride = true\n\n" + SUITES
    second = client.put(URL, json={"content": override, "origin": "override.toml"}, headers=AUTH)
    assert second.status_code == 201, second.text
    shown = client.get(URL).json()
    assert [(v["version"], v["origin"], v["content"]) for v in shown["versions"]] == [
        (1, "suites.toml", SUITES), (2, "override.toml", override)]
    assert shown["current"]["version"] == 2 and shown["override"] is True


@pytest.mark.parametrize(("body", "reason"), [
    ("[[tool.roofwatch.suites]\n", "not valid TOML"),
    ("[project]\nname = 'x'\n", "no [[tool.roofwatch.suites]] tables"),
    ("[[tool.roofwatch.suites]]\nname = 'x'\n", "invalid [[tool.roofwatch.suites]]"),
    (SUITES + 'suites_from = "main"\n', "sets suites_from but no suite_paths"),
    ("[tool.roofwatch]\noverride = 'yes'\n\n" + SUITES, "override must be true or false"),
])
def test_a_bad_config_is_refused_with_its_reason_and_nothing_is_stored(client: TestClient, body: str,
                                                                       reason: str) -> None:
    for response in (client.put(URL, content=body, headers=TOML),
                     client.put(URL, json={"content": body}, headers=AUTH)):
        assert response.status_code == 422 and reason in response.json()["detail"], response.text
    assert client.get(URL).json()["versions"] == []


def test_tokens_unknown_repositories_and_unreadable_bodies(client: TestClient,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from roofwatch.service.core.config import get_settings

    assert client.put(URL, content=SUITES).status_code == 401
    assert client.put(URL, content=SUITES, headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.get("/api/repositories/acme/nothing/suites").status_code == 404
    unknown = client.put("/api/repositories/acme/nothing/suites", content=SUITES, headers=TOML)
    assert unknown.status_code == 404 and "acme/nothing is not registered" in unknown.json()["detail"]
    assert client.put(URL, content=b"\xff\xfe[[x]]", headers=TOML).status_code == 400
    no_content = client.put(URL, json={"origin": "x.toml"}, headers=AUTH)
    assert no_content.status_code == 400 and "content" in no_content.json()["detail"]
    assert client.put(URL, content=b"{not json", headers={**AUTH, "Content-Type": "application/json"}).status_code == 400
    assert client.put(URL + "?origin=a%00b", content=SUITES, headers=TOML).status_code == 422
    assert client.put(URL, content=b"#" * (1024 * 1024 + 1), headers=TOML).status_code == 413
    monkeypatch.delenv("ROOFWATCH_API_TOKEN")
    get_settings.cache_clear()
    assert client.put(URL, content=SUITES, headers=TOML).status_code == 403  # writes disabled
    assert client.get(URL).json()["versions"] == []


def test_the_next_run_uses_the_version_put_through_the_api(client: TestClient, roofwatch_env: Path) -> None:
    assert client.put(URL + "?origin=from-ci.toml", content=SUITES, headers=TOML).status_code == 201
    done = roofwatch(["run", "--repo", "acme/legacy", "--format", "json"], {"ROOFWATCH_DATA_DIR": str(roofwatch_env)})
    (row,) = json.loads(done.stdout)
    assert row["state"] == "succeeded" and row["benchmarks"] == 1, row
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import Run

    with session_scope() as session:
        run = session.get(Run, row["run"])
        assert run is not None and run.suites_source == "stored suites v1 (from-ci.toml) (the commit declares no suites)"


def test_credentials_in_a_stored_config_are_never_shown(client: TestClient) -> None:
    secret = "ghp_" + "a1B2" * 9
    config = SUITES + f'suites_repo = "https://x-access-token:{secret}@github.com/acme/bench.git"\nsuite_paths = ["bench/"]\n'
    stored = client.put(URL, content=config, headers=TOML)
    assert stored.status_code == 201, stored.text
    for body in (stored.text, client.get(URL).text):
        assert secret not in body and "https://***@github.com/acme/bench.git" in body


def test_a_suites_env_values_are_shown_to_the_admin_token_only(client: TestClient) -> None:
    key = "hf_live_0123456789abcdefghij"
    config = ("# the kernels team's suites\n" + SUITES
              + f'setup = "huggingface-cli login --token {key}"\n'
              + f'env = {{ HF_TOKEN = "{key}", OMP_NUM_THREADS = "8" }}  # from the vault\n')
    assert client.put(URL, content=config, headers=TOML).status_code == 201

    for headers in ({}, {"Authorization": "Bearer wrong"}):
        answer = client.get(URL, headers=headers)
        assert answer.status_code == 200 and key not in answer.text
        [version] = answer.json()["versions"]
        assert version["env_masked"] is True
        assert version["content"] == config.replace(key, "***").replace('"8"', '"***"')
    shown = client.get(URL, headers=AUTH).json()["versions"][0]
    assert shown["env_masked"] is False and shown["content"] == config
