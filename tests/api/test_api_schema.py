"""The JSON API, property-tested against its own OpenAPI schema: no input makes it answer 500.

Schemathesis generates requests from ``/openapi.json`` (paths, query parameters, bodies,
including edge cases) against the app over a real seeded history, and checks every response:
no server error, status codes and bodies as documented.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


from roofwatch.service.api.app import create_app  # noqa: E402

# The schema does not depend on data; requests reach the seeded database through the
# environment the `api_env` fixture sets up (the app resolves its engine per request).
APP = create_app()
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@pytest.fixture
def api_env(seeded_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A private copy of the seeded history (the triage endpoint writes) and an API token."""
    from support.environment import _reset_caches

    shutil.copytree(seeded_data_dir, tmp_path / "data", ignore=shutil.ignore_patterns("mirrors", "worktrees"))
    monkeypatch.setenv("ROOFWATCH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("ROOFWATCH_DATABASE_URL", raising=False)
    monkeypatch.setenv("ROOFWATCH_API_TOKEN", "property-test-token")
    _reset_caches()
    yield
    _reset_caches()


@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_makes_the_api_fail(case, api_env) -> None:  # type: ignore[no-untyped-def]
    headers = {"Authorization": "Bearer property-test-token"} if case.method in ("PATCH", "PUT") else None
    case.call_and_validate(headers=headers, checks=[not_a_server_error, status_code_conformance,
                                                    response_schema_conformance])


@pytest.fixture(scope="module")
def postgres_history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A PostgreSQL database holding a three-commit history (uploaded results), and its data dir."""
    import json

    from support.environment import fresh_postgres_database
    from support.sample_repo import build_history
    from support.tests_support import roofwatch

    with fresh_postgres_database("roofwatch_schema", "the API property test on PostgreSQL") as url:
        root = tmp_path_factory.mktemp("postgres-history")
        shas = build_history(root / "sample")
        env = {"ROOFWATCH_DATA_DIR": str(root / "data"), "ROOFWATCH_DATABASE_URL": url}
        roofwatch(["db", "upgrade"], env)
        roofwatch(["repo", "add", "acme/kernels", "--clone-url", str(root / "sample")], env)
        for index, sha in enumerate(shas.values()):
            results = root / f"results-{index}.json"
            median = 0.001 * (1 + index)
            results.write_text(json.dumps({"benchmarks": [{"name": f"test_k[{n}]", "stats": {
                "median": median, "mean": median, "min": median, "rounds": 5, "data": [median] * 5}}
                for n in (1, 2)]}))
            roofwatch(["upload", str(results), "--repo", "acme/kernels", "--commit", sha, "--device-class", "CI"],
                      env, check=False)
        yield url, root / "data"


@pytest.fixture
def api_env_postgres(postgres_history: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from support.environment import _reset_caches

    url, data_dir = postgres_history
    monkeypatch.setenv("ROOFWATCH_DATA_DIR", str(data_dir))
    monkeypatch.setenv("ROOFWATCH_DATABASE_URL", url)
    monkeypatch.setenv("ROOFWATCH_API_TOKEN", "property-test-token")
    _reset_caches()
    yield
    _reset_caches()


@pytest.mark.postgres
@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_makes_the_api_fail_on_postgres(case, api_env_postgres) -> None:  # type: ignore[no-untyped-def]
    headers = {"Authorization": "Bearer property-test-token"} if case.method in ("PATCH", "PUT", "POST") else None
    case.call_and_validate(headers=headers, checks=[not_a_server_error, status_code_conformance,
                                                    response_schema_conformance])
