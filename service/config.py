"""One settings object, read from ``ROOFWATCH_*`` environment variables.

Unset values take embedded defaults (SQLite under the data dir, no broker) so that
``roofwatch run`` works on a laptop with nothing else installed. Secrets that would be
unsafe to leave at a default are refused outside development.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_DATA_DIR = Path.home() / ".local" / "share" / "roofwatch"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ROOFWATCH_", env_file=".env", extra="ignore")

    environment: Literal["development", "production"] = "development"
    data_dir: Path = DEFAULT_DATA_DIR
    database_url: str | None = None
    broker_url: str | None = None
    github_api_url: str = "https://api.github.com"
    github_webhook_secret: str | None = None
    github_token: str | None = None
    github_app_id: str | None = None
    github_app_private_key: str | None = None
    api_token: str | None = None
    public_url: str = "http://127.0.0.1:8000"
    # Default wall-time limit for one suite, seconds; a suite's own `timeout` wins.
    suite_timeout: float = 1800.0
    # Captured stdout+stderr kept per suite, bytes; the rest is dropped, not buffered.
    output_limit: int = 1_000_000
    # Log lines as readable text or as one JSON object per line (for a log shipper).
    log_format: Literal["text", "json"] = "text"
    # Interleaved A/B: rounds before a verdict may be given, and the cap for inconclusive ones.
    ab_min_rounds: int = 3
    ab_max_rounds: int = 10
    # A worker running as root starts suites as this unprivileged user (the image creates `suite`).
    suite_user: str | None = None
    # Address-space limit for a suite, bytes (RLIMIT_AS). Off by default: CUDA reserves far more
    # virtual memory than it uses, so on GPU hosts a container memory limit is the right tool.
    suite_memory_limit: int | None = None
    # Hour (UTC) of the nightly full run of every default branch, started by `roofwatch beat`.
    nightly_hour: int = 2
    # GitHub. Pushes to the default branch are always measured; these extra branch patterns
    # (fnmatch, comma-separated in the environment: "release/*,perf-*") are measured too.
    push_branches: Annotated[list[str], NoDecode] = []
    # A maintainer adds this label (or comments `/roofwatch run`) to run an untrusted pull request.
    approval_label: str = "roofwatch:approved"
    status_context: str = "roofwatch"
    # GitHub caps webhook payloads at 25 MB; anything larger is not from GitHub.
    webhook_max_bytes: int = 25 * 1024 * 1024
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
        return self

    @property
    def github_mode(self) -> Literal["app", "token", "off"]:
        """How roofwatch reports to GitHub: check runs as an App, commit statuses with a token, or not at all."""
        if self.github_app_id and self.github_app_private_key:
            return "app"
        return "token" if self.github_token else "off"

    @property
    def embedded(self) -> bool:
        """True when no broker is configured: tasks execute in this process."""
        return not self.broker_url

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

    @property
    def mirrors_dir(self) -> Path:
        return self.data_dir / "mirrors"

    @property
    def worktrees_dir(self) -> Path:
        return self.data_dir / "worktrees"

    @property
    def artifacts_dir(self) -> Path:
        return self.data_dir / "artifacts"


@lru_cache
def get_settings() -> Settings:
    return Settings()
