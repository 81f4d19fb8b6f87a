"""Approvals of untrusted pull requests: which head one covers, and whether its giver may give it.

An approval — the approval label, or a ``/roofwatch run`` comment — is pinned to the head the
pull request had when it was given. The label event carries that head. A comment does not, so
roofwatch keeps every head it hears of (``PullRequestHead``, written when a ``pull_request``
delivery arrives) and takes the newest one seen at or before the comment's ``created_at``.
A head that arrived after the comment is one the maintainer cannot have looked at.

Whether the giver may approve is GitHub's word, not the payload's ``author_association``:
``GET /repos/{owner}/{repo}/collaborators/{username}/permission`` must say write, maintain or
admin (``roofwatch.service.github.trust``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from roofwatch.service.core.config import get_settings
from roofwatch.service.core.errors import GitHubError
from roofwatch.service.core.models import PullRequestHead
from roofwatch.service.github.client import GitHubClient


@dataclass(frozen=True)
class Approval:
    approver: str
    head_sha: str | None  # the head it covers; None when roofwatch knew no head of the PR at the time


def record_head(session: Session, repository_id: int, number: int, sha: str) -> None:
    """Remember that ``sha`` was the head of pull request ``number`` now (the first time it is heard of)."""
    known = session.exec(select(PullRequestHead.id).where(
        PullRequestHead.repository_id == repository_id, PullRequestHead.number == number,
        PullRequestHead.sha == sha)).first()
    if known is not None:
        return
    try:
        with session.begin_nested():  # a redelivery racing this one may insert the same head first
            session.add(PullRequestHead(repository_id=repository_id, number=number, sha=sha))
    except IntegrityError:
        pass


def head_when(session: Session, repository_id: int, number: int, made_at: datetime | None,
              current_head: str) -> str | None:
    """The head pull request ``number`` had at ``made_at``, as far as roofwatch heard of it.

    With no head recorded at all (the pull request was opened before roofwatch received its
    events), the head GitHub reports now is the only one roofwatch can know of and is taken.
    """
    heads = session.exec(select(PullRequestHead).where(
        PullRequestHead.repository_id == repository_id, PullRequestHead.number == number)
        .order_by(col(PullRequestHead.seen_at), col(PullRequestHead.id))).all()
    if not heads:
        return current_head
    if made_at is None:
        return None
    moment = _aware(made_at)
    before = [h for h in heads if _aware(h.seen_at) <= moment]
    return before[-1].sha if before else None


def permission(repository: str, installation_id: int | None, login: str) -> str:
    """``login``'s base permission on ``repository`` as GitHub reports it; "none" when GitHub knows no such user."""
    try:
        with GitHubClient.from_settings(get_settings(), installation_id) as client:
            answer = client.collaborator_permission(repository, login)
    except GitHubError as exc:
        if exc.status == 404:
            return "none"
        raise
    return str(answer.get("permission") or "none")


def _aware(moment: datetime) -> datetime:
    # SQLite hands back naive datetimes; every stored time is UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
