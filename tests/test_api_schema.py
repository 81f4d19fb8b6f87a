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
    from conftest import _reset_caches

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
