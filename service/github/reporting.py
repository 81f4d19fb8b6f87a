"""What roofwatch shows on GitHub: a status (token) or check run (App) per head, and the PR comment.

These functions only record the desired state through the outbox; ``send`` then asks for
delivery (on the ``cpu`` queue, or on the embedded reporter's lane: ``core/embedded.py``).
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from sqlmodel import Session

from roofwatch.common.redaction import redact
from roofwatch.common.task_names import TaskName
from roofwatch.service.core import task_queue
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.models import Repository
from roofwatch.service.github import outbox
from roofwatch.service.github.comment import Summary

log = logging.getLogger(__name__)

Phase = Literal["queued", "waiting", "running", "cancelled"]
DESCRIPTION_LIMIT = 140  # GitHub refuses longer commit-status descriptions

_STATUS_OF_PHASE = {"queued": "pending", "waiting": "pending", "running": "pending", "cancelled": "error"}
_CHECK_OF_PHASE = {"queued": "queued", "waiting": "queued", "running": "in_progress", "cancelled": "completed"}
# An undecided comparison is never green (DESIGN §6): ``ROOFWATCH_INCONCLUSIVE`` makes it a
# neutral check run (grey; note that branch protection lets a neutral required check pass) or a
# failure. Commit statuses know no "neutral": there it stays ``pending``, which a required
# status never passes, and its description says what would settle it.
_STATUS_OF_CONCLUSION = {"success": "success", "failure": "failure", "neutral": "pending"}


def conclusion_of(summary: Summary) -> str:
    """The check-run conclusion GitHub gets for ``summary``, after the inconclusive policy."""
    if summary.conclusion == "neutral" and get_settings().inconclusive == "failure":
        return "failure"
    return summary.conclusion


def _short(text: str) -> str:
    # Redacted before it is cut: a cut through a token would leave a prefix no pattern knows.
    text = " ".join(redact(text).split())
    return text if len(text) <= DESCRIPTION_LIMIT else text[: DESCRIPTION_LIMIT - 1] + "…"


def show_phase(session: Session, repository: outbox.Stored, sha: str, phase: Phase, description: str,
               target_url: str) -> list[int]:
    """Queued, waiting for approval, running or cancelled: not a verdict yet (or ever)."""
    settings = get_settings()
    if settings.github_mode == "app":
        payload: dict[str, Any] = {
            "name": settings.status_context, "head_sha": sha, "status": _CHECK_OF_PHASE[phase],
            "details_url": target_url, "output": {"title": _short(description), "summary": description},
        }
        if phase == "cancelled":
            payload["conclusion"] = "cancelled"
        return _ids(outbox.publish(session, repository, "check_run", sha, payload))
    return _ids(outbox.publish(session, repository, "status", sha, {
        "state": _STATUS_OF_PHASE[phase], "description": _short(description), "target_url": target_url,
        "context": settings.status_context}))


def show_summary(session: Session, repository: Repository, sha: str, summary: Summary, target_url: str,
                 details: str = "") -> list[int]:
    """The verdict: success, failure or neutral, with its one-line title."""
    settings = get_settings()
    if settings.github_mode == "app":
        return _ids(outbox.publish(session, repository, "check_run", sha, {
            "name": settings.status_context, "head_sha": sha, "status": "completed",
            "conclusion": conclusion_of(summary), "details_url": target_url,
            "output": {"title": _short(summary.title), "summary": details or summary.title}}))
    return _ids(outbox.publish(session, repository, "status", sha, {
        "state": _STATUS_OF_CONCLUSION[conclusion_of(summary)], "description": _short(summary.title),
        "target_url": target_url, "context": settings.status_context}))


def show_comment(session: Session, repository: Repository, pr_number: int, body: str) -> list[int]:
    return _ids(outbox.publish(session, repository, "comment", str(pr_number), {"body": body}))


def send(report_ids: list[int]) -> None:
    """Ask for delivery of freshly published reports; never waits for GitHub.

    With a broker, a ``cpu`` worker delivers them; embedded, the reporter's lane. What GitHub
    refuses stays in the outbox for the next sweep.
    """
    for report_id in report_ids:
        try:
            task_queue.send(TaskName.DELIVER_REPORT, report_id)
        except Exception as exc:  # a broker outage must not fail the run; the sweep delivers later
            log.warning("report %s left for the next sweep: %s", report_id, exc)


def send_due() -> None:
    """Ask for every report whose backoff has passed: embedded mode's stand-in for ``deliver_reports``."""
    with session_scope() as session:
        due = outbox.due(session)
    send(due)


def _ids(row: Any) -> list[int]:
    return [row.id] if row is not None and row.id is not None else []
