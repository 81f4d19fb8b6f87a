"""Where the tests run: CI or not, the PostgreSQL server, fresh databases, roofwatch's caches.

PostgreSQL is used for real: each test session creates its own database on the server at
``ROOFWATCH_TEST_POSTGRES`` (default ``postgresql://postgres@127.0.0.1:5432/test``) and drops
it afterwards. Under ``CI=true`` an unreachable server is an error, not a skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

POSTGRES_ADMIN_URL = os.environ.get(
    "ROOFWATCH_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
SHARED = Path(__file__).resolve().parents[3] / "shared"


def engine_for(url: str) -> Engine:
    """An engine on a test database (a plain ``postgresql://`` URL through psycopg 3, the driver roofwatch installs)."""
    return create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))


def _postgres_reachable() -> str | None:
    try:
        engine = create_engine(POSTGRES_ADMIN_URL, connect_args={"connect_timeout": 3})
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        engine.dispose()
    except Exception as exc:  # any driver/network failure means "not here"
        return f"{type(exc).__name__}: {exc}".splitlines()[0]
    return None


@contextmanager
def fresh_postgres_database(prefix: str, needed_by: str, password: str | None = None) -> Iterator[str]:
    """A new, empty PostgreSQL database named ``prefix_<random>``: its URL, dropped afterwards.

    Unreachable server: the test skips, or fails under ``CI=true`` (CI must run ``needed_by``).
    ``password`` goes into the URL (the server trusts loopback, so any password connects).
    """
    problem = _postgres_reachable()
    if problem:
        message = f"PostgreSQL not reachable at {POSTGRES_ADMIN_URL} ({problem})"
        if IN_CI:
            pytest.fail(f"{message} — CI must run {needed_by}")
        pytest.skip(f"{message}; {needed_by} skipped")
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(POSTGRES_ADMIN_URL).set(database=name)
    if password is not None:
        url = url.set(password=password)
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()



def _reset_caches() -> None:
    from roofwatch.service.core.config import get_settings
    from roofwatch.service.core.db import forget_engine

    forget_engine()
    get_settings.cache_clear()
