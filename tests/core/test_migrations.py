"""Alembic is the only way the schema is made, on SQLite and on PostgreSQL."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect
from sqlmodel import SQLModel

import roofwatch.service.core.models  # noqa: F401
from roofwatch.service.core.db import downgrade, migrate

TABLES = {"repository", "commit", "device", "run", "suiteexecution", "benchmark",
          "measurement", "testoutcome", "change", "webhookdelivery", "alembic_version"}


def _sqlalchemy(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def test_upgrade_creates_every_table(database_url: str) -> None:
    migrate(database_url)
    engine = create_engine(_sqlalchemy(database_url))
    assert TABLES <= set(inspect(engine).get_table_names())
    engine.dispose()


def test_migrations_match_the_models(database_url: str) -> None:
    """A model change without a migration fails here, not in production."""
    migrate(database_url)
    engine = create_engine(_sqlalchemy(database_url))
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), SQLModel.metadata)
    engine.dispose()
    assert diff == []


def test_upgrade_is_idempotent_and_downgrade_reverses(database_url: str) -> None:
    migrate(database_url)
    migrate(database_url)
    downgrade(database_url, "base")
    engine = create_engine(_sqlalchemy(database_url))
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    engine.dispose()
    migrate(database_url)


def test_downgrading_below_64_bit_installation_ids_forgets_only_those(database_url: str) -> None:
    """0011 widened installation_id; going back cannot keep an id beyond 32 bits, and must not fail on it."""
    from sqlalchemy import text

    migrate(database_url)
    engine = create_engine(_sqlalchemy(database_url))
    names = ("acme/wide-id", "acme/narrow-id")
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM repository WHERE full_name IN (:a, :b)"), {"a": names[0], "b": names[1]})
        for name, installation in zip(names, (2**63 - 1, 4242), strict=True):
            connection.execute(text(
                "INSERT INTO repository (full_name, clone_url, default_branch, trust_policy, installation_id, "
                "created_at) VALUES (:name, '/nonexistent', 'main', 'collaborators', :installation, "
                "CURRENT_TIMESTAMP)"), {"name": name, "installation": installation})
    downgrade(database_url, "0009")
    with engine.begin() as connection:
        ids = dict(connection.execute(text("SELECT full_name, installation_id FROM repository "
                                           "WHERE full_name IN (:a, :b)"), {"a": names[0], "b": names[1]}).all())
        assert ids == {"acme/wide-id": None, "acme/narrow-id": 4242}
        connection.execute(text("DELETE FROM repository WHERE full_name IN (:a, :b)"), {"a": names[0], "b": names[1]})
    engine.dispose()
    migrate(database_url)
