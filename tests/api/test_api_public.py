"""The JSON API shows records through its Public models: declared fields only, secrets redacted by type."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel

from roofwatch.service.api import public
from roofwatch.service.core import models

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"

# Each Public model and the table it shows; the columns it leaves out are private on purpose.
SHOWN = [
    (public.RepositoryPublic, models.Repository, set()),
    (public.RunPublic, models.Run, set()),
    (public.CommitPublic, models.Commit, set()),
    (public.DevicePublic, models.Device, set()),
    (public.SuiteExecutionPublic, models.SuiteExecution, set()),
    (public.TestOutcomePublic, models.TestOutcome, set()),
    (public.BenchmarkPublic, models.Benchmark, set()),
    (public.ComparisonPublic, models.Comparison, set()),
    # the result row also names its benchmark (name, suite, id), joined in by the route
    (public.ComparisonResultPublic, models.ComparisonResult, set()),
]


@pytest.mark.parametrize(("shown", "table", "private"), SHOWN, ids=[s[0].__name__ for s in SHOWN])
def test_every_public_field_is_a_column_and_every_column_is_decided(shown: type[BaseModel], table: type[BaseModel],
                                                                    private: set[str]) -> None:
    joined = {"benchmark", "suite", "benchmark_id"} if shown is public.ComparisonResultPublic else set()
    assert set(shown.model_fields) - joined <= set(table.model_fields)  # no field the row does not have
    assert set(table.model_fields) - set(shown.model_fields) == private  # a new column is a decision


@pytest.mark.parametrize(("model", "field"), [
    (public.RepositoryPublic, "clone_url"), (public.RunPublic, "error"), (public.RunPublic, "log_excerpt"),
    (public.RunPublic, "analysis_error"), (public.SuiteExecutionPublic, "output_tail"),
    (public.TestOutcomePublic, "message"), (public.ComparisonPublic, "error"), (public.CommitPublic, "message"),
])
def test_text_a_secret_can_reach_is_redacted_by_its_type(model: type[BaseModel], field: str) -> None:
    annotation = model.model_fields[field]
    assert any(getattr(m, "func", None) is public.redact for m in annotation.metadata), field


def test_a_secret_stored_unredacted_never_leaves_through_the_api(roofwatch_env: Path) -> None:
    """Rows written around the redaction at storage (an old version, a hand edit) are shown redacted."""
    from roofwatch.service.api.app import create_app
    from roofwatch.service.core.db import migrate, session_scope

    migrate()
    with session_scope() as session:
        repository = models.Repository(full_name="acme/secret",
                                       clone_url=f"https://x-access-token:{TOKEN}@github.com/acme/secret.git")
        session.add(repository)
        session.flush()
        commit = models.Commit(repository_id=repository.id, sha="a" * 40, message=f"token {TOKEN}")
        session.add(commit)
        session.flush()
        run = models.Run(repository_id=repository.id, commit_id=commit.id, trigger="manual", state="failed",
                         idempotency_key="acme/secret@" + "a" * 40 + ":cpu:manual:0",
                         error=f"cannot fetch https://x-access-token:{TOKEN}@github.com/acme/secret.git")
        session.add(run)
        session.flush()
        session.add(models.SuiteExecution(run_id=run.id, name="benchmarks", kind="benchmark", status="error",
                                          output_tail=f"Authorization: token {TOKEN}"))
        run_id = run.id
    client = TestClient(create_app())
    for url in ("/api/repositories", f"/api/runs/{run_id}"):
        response = client.get(url)
        assert response.status_code == 200 and TOKEN not in response.text, url
    detail = client.get(f"/api/runs/{run_id}").json()
    assert "github.com/acme/secret.git" in detail["run"]["error"]  # the rest of the text is kept
    assert set(detail) == {"run", "commit", "device", "suites", "outcomes", "measurements"}
