"""Engine, sessions and migrations.

The schema is made only by Alembic (``migrate``); nothing calls ``create_all``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, create_engine

from roofwatch.service.core.config import get_settings

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record):  # type: ignore[no-untyped-def]
            # WAL lets the dashboard read while a run writes; foreign keys are off by default.
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    # A database host that drops packets must fail a connection attempt in seconds, not minutes.
    return create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": 5})


@lru_cache
def _settings_engine() -> Engine:
    return make_engine(get_settings().sqlalchemy_url)


# Work on an embedded lane (``core/embedded.py``) runs against the database it was submitted in.
_bound: ContextVar[Engine | None] = ContextVar("roofwatch_bound_engine", default=None)


def get_engine() -> Engine:
    """The engine of this context's work, else the one the settings name (made once per process)."""
    return _bound.get() or _settings_engine()


def forget_engine() -> None:
    """Close the settings' engine, so the next ``get_engine`` reads them again (a test or a benchmark points at a
    new database)."""
    if _settings_engine.cache_info().currsize:
        _settings_engine().dispose()
    _settings_engine.cache_clear()


@contextmanager
def bound_to(engine: Engine) -> Iterator[None]:
    """Within this block (this thread or task), ``get_engine`` and ``session_scope`` use ``engine``."""
    token = _bound.set(engine)
    try:
        yield
    finally:
        _bound.reset(token)


@contextmanager
def session_scope(engine: Engine | None = None) -> Iterator[Session]:
    """A session that commits on success and rolls back on error."""
    with Session(engine or get_engine(), expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation would choke on a '%' in a password.
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def migrate(url: str | None = None, revision: str = "head") -> None:
    """Bring the database at ``url`` (default: the configured one) to ``revision``."""
    url = url or get_settings().sqlalchemy_url
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    """Step the database at ``url`` back to ``revision`` (``base`` drops every table)."""
    command.downgrade(alembic_config(url), revision)
