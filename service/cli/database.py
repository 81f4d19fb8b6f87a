"""The database a command works on, made ready before it is used."""

from __future__ import annotations

from roofwatch.service.core.config import get_settings


def prepare_database() -> None:
    """Migrate automatically on the embedded SQLite default; a shared server is migrated on purpose."""
    if get_settings().sqlalchemy_url.startswith("sqlite"):
        from roofwatch.service.core.db import migrate

        migrate()
