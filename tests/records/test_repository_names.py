"""`regressions`, `triage`, `compare` and the API name a repository the way `run` does.

A repository is an ``OWNER/NAME``, a clone URL or a local path (which ``run`` registers as
``local/<name>``); one nobody registered is an error naming what was asked: exit 2 on the
command line, 404 with a JSON detail from the API, never an empty list.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from support.sample_repo import init
from typer.testing import CliRunner

from roofwatch.service.cli.main import app

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def seeded_copy(seeded_data_dir: Path, roofwatch_env: Path) -> Path:
    """A private copy of the seeded database (acme/kernels, cloned from a local path); the sample's path."""
    roofwatch_env.mkdir(parents=True, exist_ok=True)
    # SQLite's backup API: the copy includes what is still in the write-ahead log.
    with sqlite3.connect(seeded_data_dir / "roofwatch.db") as source, \
            sqlite3.connect(roofwatch_env / "roofwatch.db") as target:
        source.backup(target)
    return seeded_data_dir.parent / "sample"


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def changes(*repo: str) -> list[dict[str, object]]:
    done = invoke("regressions", "--format", "json", *repo)
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def register_local(path: Path) -> str:
    """What `roofwatch run --repo PATH` does first: register the path as ``local/<name>``."""
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.flows.repositories import resolve_repository

    with session_scope() as session:
        return resolve_repository(session, str(path)).full_name


def test_regressions_accepts_a_path_a_url_and_a_name(seeded_copy: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    by_name = changes("--repo", "acme/kernels")
    assert by_name and {row["repository"] for row in by_name} == {"acme/kernels"}
    assert changes("--repo", str(seeded_copy)) == by_name
    assert changes("--repo", str(seeded_copy) + "/") == by_name
    # A URL names its OWNER/NAME even where the repository was registered with another clone URL.
    assert changes("--repo", "https://github.com/acme/kernels.git") == by_name
    assert changes("--repo", "git@github.com:acme/kernels.git") == by_name

    other = tmp_path / "other"
    init(other)  # a checkout that was never measured (a folder that is no git repository is refused)
    assert register_local(other) == "local/other"
    monkeypatch.chdir(tmp_path)
    assert changes("--repo", "other") == [] and changes("--repo", "./other") == []
    assert changes("--repo", "local/other") == []
    assert len(changes()) == len(by_name)


@pytest.mark.parametrize("asked", ["nobody/nothing", "/no/such/checkout", "https://example.com/nobody/nothing.git"])
def test_regressions_of_an_unknown_repository_is_an_error_naming_it(seeded_copy: Path, asked: str) -> None:
    for extra in ([], ["--format", "json"]):
        done = invoke("regressions", "--repo", asked, *extra)
        assert done.exit_code == 2
        assert done.stdout == ""
        assert f"no repository {asked!r} is known" in done.stderr


def test_triage_names_the_repository_the_same_way(seeded_copy: Path, tmp_path: Path) -> None:
    change = changes("--repo", "acme/kernels")[0]
    unknown = invoke("triage", str(change["id"]), "acknowledged", "--repo", "nobody/nothing")
    assert unknown.exit_code == 2 and "'nobody/nothing'" in unknown.stderr

    other = tmp_path / "other"
    init(other)  # a checkout that was never measured (a folder that is no git repository is refused)
    register_local(other)
    elsewhere = invoke("triage", str(change["id"]), "acknowledged", "--repo", str(other))
    assert elsewhere.exit_code == 2
    assert f"change {change['id']} belongs to acme/kernels, not local/other" in elsewhere.stderr
    assert changes("--repo", "acme/kernels")[0]["state"] == change["state"]

    done = invoke("triage", str(change["id"]), "acknowledged", "--repo", str(seeded_copy), "--note", "seen")
    assert done.exit_code == 0, done.output
    assert changes("--repo", str(seeded_copy))[0]["state"] == "acknowledged"


def test_compare_of_an_unknown_repository_is_an_error_naming_it(seeded_copy: Path) -> None:
    done = invoke("compare", "HEAD~1", "HEAD", "--repo", "nobody/nothing")
    assert done.exit_code == 2
    assert "'nobody/nothing' is not a registered repository" in done.output


def test_the_api_names_repositories_like_run(seeded_copy: Path) -> None:
    from roofwatch.service.api.app import create_app

    client = TestClient(create_app())
    by_name = client.get("/api/changes", params={"repo": "acme/kernels"}).json()
    assert by_name
    for spec in (str(seeded_copy), "https://github.com/acme/kernels"):
        assert client.get("/api/changes", params={"repo": spec}).json() == by_name
        assert client.get("/api/benchmarks", params={"repo": spec}).json() == client.get(
            "/api/benchmarks", params={"repo": "acme/kernels"}).json()
        assert len(client.get("/api/runs", params={"repo": spec}).json()) == 3

    for asked in ("nobody/nothing", "/no/such/checkout"):
        for endpoint in ("/api/changes", "/api/runs", "/api/benchmarks"):
            answer = client.get(endpoint, params={"repo": asked})
            assert answer.status_code == 404, (endpoint, asked, answer.text)
            assert f"no repository {asked!r} is known" in answer.json()["detail"]
    for endpoint in ("/api/changes", "/api/runs", "/api/benchmarks"):  # a NUL is refused before any look-up
        answer = client.get(endpoint, params={"repo": "bad\x00name"})
        assert answer.status_code == 422 and "NUL" in answer.text, (endpoint, answer.text)
