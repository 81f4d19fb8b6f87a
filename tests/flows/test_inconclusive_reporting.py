"""An undecided comparison is never a green check: neutral (or failure) check runs, pending statuses."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from roofwatch.service.core.config import get_settings
from roofwatch.service.github.comment import Summary
from roofwatch.service.github.reporting import _STATUS_OF_CONCLUSION, conclusion_of


@pytest.fixture
def policy(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


@pytest.mark.parametrize(("setting", "summary", "check_run", "status"), [
    ("neutral", "neutral", "neutral", "pending"),
    ("failure", "neutral", "failure", "failure"),
    ("neutral", "success", "success", "success"),
    ("failure", "failure", "failure", "failure"),
])
def test_inconclusive_policy(policy: pytest.MonkeyPatch, setting: str, summary: str, check_run: str,
                             status: str) -> None:
    policy.setenv("ROOFWATCH_INCONCLUSIVE", setting)
    found = conclusion_of(Summary(summary, "title"))  # type: ignore[arg-type]
    assert found == check_run and _STATUS_OF_CONCLUSION[found] == status
    assert "success" not in (found, _STATUS_OF_CONCLUSION[found]) or summary == "success"
