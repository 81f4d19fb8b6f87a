"""Production refuses weak secrets, SQLite and running pull request code without the sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from support.tests_support import roofwatch

from roofwatch.common.settings import WorkerSettings
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
    ({"sandbox": "unconfined"}, "ROOFWATCH_SANDBOX=unconfined"),
    # The worker's single-user escape hatch does not reach the service, which holds every secret.
    ({"sandbox": "unconfined", "allow_unconfined_in_production": True}, "ROOFWATCH_SANDBOX is not bubblewrap"),
])
def test_unsafe_production_settings_are_refused(change: dict[str, str], reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        Settings(**(GOOD | change))  # type: ignore[arg-type]


def test_development_keeps_its_embedded_defaults() -> None:
    assert Settings(environment="development", api_token="x", sandbox="unconfined").api_token == "x"  # type: ignore[arg-type]


def test_a_gpu_worker_in_production_needs_none_of_the_services_credentials() -> None:
    settings = WorkerSettings(environment="production", broker_url="redis://gpu-broker:6379/0")  # type: ignore[arg-type]
    assert settings.sandbox == "bubblewrap"


def test_a_worker_in_production_refuses_to_run_suites_unconfined() -> None:
    with pytest.raises(ValidationError, match="ROOFWATCH_ALLOW_UNCONFINED_IN_PRODUCTION"):
        WorkerSettings(environment="production", sandbox="unconfined")  # type: ignore[arg-type]
    allowed = WorkerSettings(environment="production", sandbox="unconfined",  # type: ignore[arg-type]
                             allow_unconfined_in_production=True)
    assert allowed.sandbox == "unconfined"


def test_roofwatch_worker_checks_its_own_settings_first(tmp_path: Path) -> None:
    """`roofwatch worker` in production: refused unconfined, and never asks a GPU worker for the service's secrets."""
    base = {"ROOFWATCH_ENVIRONMENT": "production", "ROOFWATCH_DATA_DIR": str(tmp_path)}
    refused = roofwatch(["worker", "--queues", "gpu.test"], {**base, "ROOFWATCH_SANDBOX": "unconfined"}, check=False)
    assert refused.returncode == 2 and "ROOFWATCH_ALLOW_UNCONFINED_IN_PRODUCTION" in refused.stderr
    # Without a broker it stops at the broker, not at the API token, webhook secret or database URL.
    no_broker = roofwatch(["worker", "--queues", "gpu.test"], base, check=False)
    assert no_broker.returncode == 2 and "needs ROOFWATCH_BROKER_URL" in no_broker.stderr, no_broker.stderr
