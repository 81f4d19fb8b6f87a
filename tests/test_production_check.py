"""Production refuses weak secrets, SQLite and running pull request code without the sandbox."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from roofwatch.service.core.config import Settings

STRONG = "s3cr3t-" + "x" * 40
GOOD = {"environment": "production", "api_token": STRONG, "github_webhook_secret": STRONG + "w",
        "database_url": "postgresql://roofwatch@db/roofwatch"}


def test_a_sound_production_configuration_starts() -> None:
    assert Settings(**GOOD).sandbox == "bubblewrap"  # type: ignore[arg-type]


@pytest.mark.parametrize(("change", "reason"), [
    ({"api_token": "x"}, "ROOFWATCH_API_TOKEN is weak"),
    ({"github_webhook_secret": "a" * 40 + " " + "b"}, "ROOFWATCH_GITHUB_WEBHOOK_SECRET is weak"),
    ({"database_url": "sqlite:////var/lib/roofwatch/roofwatch.db"}, "DATABASE_URL is SQLite"),
    ({"sandbox": "unconfined"}, "ROOFWATCH_SANDBOX is not bubblewrap"),
])
def test_unsafe_production_settings_are_refused(change: dict[str, str], reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        Settings(**(GOOD | change))  # type: ignore[arg-type]


def test_development_keeps_its_embedded_defaults() -> None:
    assert Settings(environment="development", api_token="x", sandbox="unconfined").api_token == "x"  # type: ignore[arg-type]
