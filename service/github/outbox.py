"""Reports to GitHub that are never lost: desired state in the database, delivered when possible.

``publish`` records what GitHub should show (a commit status, a check run, the PR comment) in
a ``GitHubReport`` row and bumps its version. ``deliver`` sends the newest version; when
GitHub stays unreachable after the client's own retries, the row keeps its error and a
``next_attempt_at`` with backoff, and ``deliver_due`` — run every minute by the scheduler,
and by ``roofwatch serve`` in embedded mode — tries again. A run's own completion never
waits on GitHub.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from roofwatch.common.redaction import redact, redact_json
from roofwatch.service.core.config import Settings, get_settings
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.errors import GitHubError
from roofwatch.service.core.models import GitHubReport, Repository, utcnow
from roofwatch.service.github.client import GitHubClient
from roofwatch.service.github.comment import MARKER

log = logging.getLogger(__name__)

RETRY_BASE_S = 30
RETRY_MAX_S = 3600
# Deliveries of one row must not overlap (two would both create the comment); Postgres row
# locks cover separate processes, this covers threads of one embedded process.
_row_locks: dict[int, threading.Lock] = {}
_row_locks_guard = threading.Lock()

ClientFactory = Callable[[Settings, Repository], GitHubClient]


def _default_client(settings: Settings, repository: Repository) -> GitHubClient:
    return GitHubClient.from_settings(settings, repository.installation_id)


class Stored(Protocol):
    """A stored repository, as a row or as a flow's frozen reference to one: all a report needs is its id."""

    @property
    def id(self) -> int | None: ...


def publish(session: Session, repository: Stored, target: str, subject: str,
            payload: dict[str, Any]) -> GitHubReport | None:
    """Record the desired state of one GitHub target; None when GitHub reporting is off.

    Every string in ``payload`` is redacted first: nothing posted to GitHub (or kept here to
    be posted) carries a credential.
    """
    if get_settings().github_mode == "off":
        return None
    payload = redact_json(payload)
    row = session.exec(select(GitHubReport).where(
        GitHubReport.repository_id == repository.id, GitHubReport.target == target,
        GitHubReport.subject == subject)).first()
    if row is None:
        row = GitHubReport(repository_id=repository.id, target=target, subject=subject,  # type: ignore[arg-type]
                           payload=payload)
    elif row.payload != payload:
        row.payload, row.version = payload, row.version + 1
        row.attempts, row.next_attempt_at = 0, utcnow()
    else:
        return row
    row.updated_at = utcnow()
    session.add(row)
    session.flush()
    return row


def deliver(report_id: int, client_factory: ClientFactory = _default_client, engine: Engine | None = None) -> bool:
    """Send the newest version of one report; True when GitHub shows it now."""
    with _row_locks_guard:
        lock = _row_locks.setdefault(report_id, threading.Lock())
    with lock, session_scope(engine) as session:
        row = session.exec(select(GitHubReport).where(GitHubReport.id == report_id).with_for_update()).first()
        if row is None or row.delivered_version >= row.version:
            return True
        repository = session.get(Repository, row.repository_id)
        assert repository is not None
        version = row.version
        try:
            with client_factory(get_settings(), repository) as client:
                row.external_id = _send(client, repository.full_name, row)
        except GitHubError as exc:
            row.attempts += 1
            row.last_error = redact(str(exc))[:2000]
            delay = min(RETRY_MAX_S, RETRY_BASE_S * 2 ** (row.attempts - 1))
            row.next_attempt_at = utcnow() + timedelta(seconds=delay)
            session.add(row)
            log.warning("report %s (%s %s of %s) not delivered, retry in %ss: %s", row.id, row.target,
                        row.subject, repository.full_name, delay, exc)
            return False
        row.delivered_version, row.attempts, row.last_error = version, 0, ""
        session.add(row)
        return True


def due(session: Session, limit: int = 200) -> list[int]:
    """Reports whose newest version is not on GitHub yet and whose backoff has passed."""
    rows = session.exec(select(GitHubReport.id).where(
        col(GitHubReport.delivered_version) < col(GitHubReport.version),
        col(GitHubReport.next_attempt_at) <= utcnow()).order_by(col(GitHubReport.id)).limit(limit)).all()
    return [int(r) for r in rows if r is not None]


def deliver_due(client_factory: ClientFactory = _default_client) -> tuple[int, int]:
    """Try every due report once; (delivered, still pending)."""
    with session_scope() as session:
        ids = due(session)
    delivered = sum(deliver(report_id, client_factory) for report_id in ids)
    return delivered, len(ids) - delivered


def _send(client: GitHubClient, repo: str, row: GitHubReport) -> str:
    """Make GitHub show ``row.payload``; the external id (check run, comment) to keep."""
    payload = dict(row.payload)
    if row.target == "status":
        client.create_status(repo, row.subject, payload)
        return row.external_id
    if row.target == "check_run":
        if row.external_id:
            payload.pop("head_sha", None)  # fixed when the check run was created
            return str(client.update_check_run(repo, int(row.external_id), payload)["id"])
        return str(client.create_check_run(repo, payload)["id"])
    if row.target == "comment":
        return _upsert_comment(client, repo, int(row.subject), payload["body"], row.external_id)
    raise GitHubError(f"unknown report target {row.target!r}")


def _upsert_comment(client: GitHubClient, repo: str, number: int, body: str, known_id: str) -> str:
    """Edit roofwatch's comment on the pull request, creating it only when there is none."""
    if known_id:
        try:
            return str(client.update_comment(repo, int(known_id), body)["id"])
        except GitHubError as exc:
            if exc.status != 404:
                raise
            # Someone deleted it: look for another one with the marker, else start a new one.
    for comment in client.comments(repo, number):
        if MARKER in (comment.get("body") or ""):
            return str(client.update_comment(repo, int(comment["id"]), body)["id"])
    return str(client.create_comment(repo, number, body)["id"])
