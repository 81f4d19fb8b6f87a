"""One settings object, read from ``ROOFWATCH_*`` environment variables.

Unset values take embedded defaults (SQLite under the data dir, no broker) so that
``roofwatch run`` works on a laptop with nothing else installed. Secrets that would be
unsafe to leave at a default are refused outside development.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from roofwatch.common.redaction import remember_secrets
from roofwatch.common.settings import DEFAULT_DATA_DIR, WorkerSettings

__all__ = ["DEFAULT_DATA_DIR", "Settings", "get_settings"]


# A secret an attacker could guess or brute-force against the webhook HMAC is no secret.
MIN_SECRET_LENGTH = 32


class Settings(WorkerSettings):
    """The service's settings: a worker's, plus credentials and what only the service uses."""

    model_config = SettingsConfigDict(env_prefix="ROOFWATCH_", env_file=".env", extra="ignore")

    environment: Literal["development", "production"] = "development"
    database_url: str | None = None
    github_api_url: str = "https://api.github.com"
    github_webhook_secret: str | None = None
    github_token: str | None = None
    github_app_id: str | None = None
    github_app_private_key: str | None = None
    api_token: str | None = None
    public_url: str = "http://127.0.0.1:8000"
    # Interleaved A/B: rounds before a verdict may be given, and the cap for inconclusive ones.
    ab_min_rounds: int = 3
    ab_max_rounds: int = 10
    # Wall time for one comparison's rounds (seconds; 0: only the round cap), and what an
    # undecided comparison reports on GitHub: never success (see docs/analysis.md).
    ab_budget_s: float = 1800.0
    # What an A/B's rounds after the first measure: "open", only the benchmarks still undecided (and
    # a confirmation's candidates), or "all", every benchmark suite in full each round.
    ab_later_rounds: Literal["open", "all"] = "open"
    inconclusive: Literal["neutral", "failure"] = "neutral"
    # GitHub. Pushes to the default branch are always measured; these extra branch patterns
    # (fnmatch, comma-separated in the environment: "release/*,perf-*") are measured too.
    push_branches: Annotated[list[str], NoDecode] = []
    # A maintainer adds this label (or comments `/roofwatch run`) to run an untrusted pull request.
    approval_label: str = "roofwatch:approved"
    status_context: str = "roofwatch"
    # GitHub caps webhook payloads at 25 MB; anything larger is not from GitHub.
    webhook_max_bytes: int = Field(default=25 * 1024 * 1024, ge=1)
    # Webhook bodies read at once, before their signature is known; more are answered 503. Each
    # keeps at most 1 MiB in memory while it is read; the rest waits in a temporary file.
    webhook_max_concurrent: int = Field(default=8, ge=1)
    # The device class whose queue webhook-triggered runs go to when a broker is configured
    # (embedded mode measures on this machine's device).
    pr_device_class: str | None = None

    @field_validator("push_branches", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @model_validator(mode="after")
    def _refuse_unsafe_production(self) -> Settings:
        if self.environment == "production":
            missing = [
                name
                for name, value in (
                    ("ROOFWATCH_API_TOKEN", self.api_token),
                    ("ROOFWATCH_GITHUB_WEBHOOK_SECRET", self.github_webhook_secret),
                    ("ROOFWATCH_DATABASE_URL", self.database_url),
                )
                if not value
            ]
            if missing:
                raise ValueError(
                    "refusing to start in production without: " + ", ".join(missing)
                )
            problems = [f"{name} is weak (at least {MIN_SECRET_LENGTH} characters, no whitespace)"
                        for name, value in (("ROOFWATCH_API_TOKEN", self.api_token),
                                            ("ROOFWATCH_GITHUB_WEBHOOK_SECRET", self.github_webhook_secret))
                        if value and (len(value) < MIN_SECRET_LENGTH or any(c.isspace() for c in value))]
            if self.sqlalchemy_url.startswith("sqlite"):
                problems.append("ROOFWATCH_DATABASE_URL is SQLite (a file a local process can read; use PostgreSQL)")
            if self.sandbox != "bubblewrap":
                problems.append("ROOFWATCH_SANDBOX is not bubblewrap (pull request code would run unconfined)")
            if problems:
                raise ValueError("refusing to start in production: " + "; ".join(problems))
        return self

    @property
    def github_mode(self) -> Literal["app", "token", "off"]:
        """How roofwatch reports to GitHub: check runs as an App, commit statuses with a token, or not at all."""
        if self.github_app_id and self.github_app_private_key:
            return "app"
        return "token" if self.github_token else "off"

    @property
    def sqlalchemy_url(self) -> str:
        """The database URL with the driver SQLAlchemy should use.

        A plain ``postgresql://`` URL is accepted and mapped to psycopg 3, the driver
        roofwatch installs.
        """
        url = self.database_url or f"sqlite:///{self.data_dir / 'roofwatch.db'}"
        for prefix in ("postgresql://", "postgres://"):
            if url.startswith(prefix):
                return "postgresql+psycopg://" + url[len(prefix) :]
        return url


@lru_cache
def get_settings() -> Settings:
    settings = Settings()
    # From here on, these values are masked wherever roofwatch writes text (logs included).
    remember_secrets(settings.github_webhook_secret, settings.github_token, settings.api_token,
                     settings.github_app_private_key)
    return settings
