"""Stored suite configs: the ``[[tool.roofwatch.suites]]`` of a repository kept in roofwatch, not in the repository.

Every change is a new version (nothing is overwritten), so a run's ``suites_source`` names the
version it used. Jobs carry the newest version's text; precedence is decided on the worker,
which is the one that sees the commit's own ``pyproject.toml`` (``roofwatch.suite_config.external``).
"""

from __future__ import annotations

from sqlalchemy.orm import object_session
from sqlmodel import Session, col, select

from roofwatch.service.core.models import Repository, SuiteConfig
from roofwatch.suite_config.external import parse_suites_file


def store(session: Session, repository: Repository, text: str, origin: str) -> SuiteConfig:
    """Validate ``text`` and keep it as the newest version (the same text again is no new version)."""
    parse_suites_file(text)  # SuiteConfigError names what is wrong; nothing is stored
    newest = current(session, repository.id)  # type: ignore[arg-type]
    if newest is not None and newest.content == text:
        return newest
    config = SuiteConfig(repository_id=repository.id, version=(newest.version + 1) if newest else 1,  # type: ignore[arg-type]
                         content=text, origin=origin)
    session.add(config)
    session.flush()
    return config


def current(session: Session, repository_id: int) -> SuiteConfig | None:
    return session.exec(select(SuiteConfig).where(SuiteConfig.repository_id == repository_id)
                        .order_by(col(SuiteConfig.version).desc())).first()


def label(config: SuiteConfig) -> str:
    """How a run's record names the config it used."""
    return f"stored suites v{config.version} ({config.origin or 'no file name'})"


def job_fields(row: object, repository: Repository) -> dict[str, str]:
    """The stored-suites fields of a worker's job for ``row`` (a run or a comparison): the newest version, if any."""
    session = object_session(row)
    stored = current(session, repository.id) if isinstance(session, Session) and repository.id is not None else None
    return {"suites_toml": stored.content, "suites_label": label(stored)} if stored else {}
