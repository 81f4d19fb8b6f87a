"""What each webhook event means for roofwatch.

``route`` runs inside the request, on the validated payload and the registered repository:
it decides — quickly, without git or GitHub calls — whether the delivery starts work and
records installations. ``handle`` runs afterwards (on the measuring lane when embedded, on
the ``cpu`` queue otherwise), on the event as ``route`` saw it (``payloads.for_queue``: it is
not validated again): it fetches, checks trust, creates runs and reports on GitHub.
"""

from __future__ import annotations

import fnmatch
import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import OperationalError
from sqlmodel import Session, select

from roofwatch.common.errors import RoofwatchError
from roofwatch.common.redaction import redact
from roofwatch.service.core.config import Settings, get_settings
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.errors import GitHubError
from roofwatch.service.core.links import dashboard_url
from roofwatch.service.core.models import Repository, WebhookDelivery
from roofwatch.service.flows import approvals
from roofwatch.service.flows import pull_request as pull_requests
from roofwatch.service.flows import push as pushes
from roofwatch.service.github import reporting, trust
from roofwatch.service.github.client import GitHubClient
from roofwatch.service.github.payloads import (
    EVENT_MODELS,
    Event,
    InstallationEvent,
    IssueCommentEvent,
    PingEvent,
    PullRequest,
    PullRequestEvent,
    PushEvent,
)
from roofwatch.service.records import acceptances
from roofwatch.service.records.repositories import RepositoryRef, reference

log = logging.getLogger(__name__)

RUN_ACTIONS = ("opened", "synchronize", "reopened")


@dataclass(frozen=True)
class Decision:
    accepted: bool  # True: ``handle`` has work to do
    detail: str


def repository_name(payload: Any) -> str:
    repository = getattr(payload, "repository", None)
    return repository.full_name if repository is not None else ""


def route(session: Session, event: str, payload: Any, settings: Settings) -> Decision:
    """Decide what a validated delivery asks for. Installation bookkeeping happens here."""
    if event == "ping":
        assert isinstance(payload, PingEvent)
        return Decision(False, f"pong (hook {payload.hook_id})")
    if event == "installation":
        assert isinstance(payload, InstallationEvent)
        return Decision(False, _installation(session, payload))
    if event not in EVENT_MODELS:
        return Decision(False, f"event {event!r} is not one roofwatch acts on")
    name = repository_name(payload)
    repository = session.exec(select(Repository).where(Repository.full_name == name)).first()
    if repository is None:
        return Decision(False, f"repository {name} is not registered "
                               f"(roofwatch repo add {name} --clone-url URL)")
    installation = getattr(payload, "installation", None)
    if installation is not None and repository.installation_id != installation.id:
        repository.installation_id = installation.id
        session.add(repository)
    if event == "push":
        assert isinstance(payload, PushEvent)
        return _route_push(payload, repository, settings)
    if event == "pull_request":
        assert isinstance(payload, PullRequestEvent)
        if payload.action in (*RUN_ACTIONS, "labeled"):
            # Every head roofwatch hears of, when it hears of it: what a later comment approves.
            approvals.record_head(session, repository.id, payload.number,  # type: ignore[arg-type]
                                  payload.pull_request.head.sha)
        return _route_pull_request(payload, settings)
    assert isinstance(payload, IssueCommentEvent)
    return _route_comment(payload)


def _route_push(push: PushEvent, repository: Repository, settings: Settings) -> Decision:
    if not push.ref.startswith("refs/heads/"):
        return Decision(False, f"{push.ref} is not a branch")
    branch = push.ref.removeprefix("refs/heads/")
    if push.deleted:
        return Decision(False, f"branch {branch} was deleted")
    # GitHub's own word on the default branch wins over a registration that guessed "main".
    defaults = {repository.default_branch, push.repository.default_branch}
    tracked = branch in defaults or any(fnmatch.fnmatchcase(branch, p) for p in settings.push_branches)
    if not tracked:
        return Decision(False, f"branch {branch} is not tracked (default branch {repository.default_branch}; "
                               "more with ROOFWATCH_PUSH_BRANCHES)")
    return Decision(True, f"push to {branch}: measure {push.after[:12]}")


def _route_pull_request(event: PullRequestEvent, settings: Settings) -> Decision:
    if event.action in RUN_ACTIONS:
        return Decision(True, f"#{event.number} {event.action}: compare {event.pull_request.head.sha[:12]}")
    if event.action == "closed":
        return Decision(True, f"#{event.number} closed: cancel its runs")
    if event.action == "labeled" and event.label is not None and event.label.name == settings.approval_label:
        return Decision(True, f"#{event.number} approved by label from @{event.sender.login}")
    return Decision(False, f"pull_request action {event.action!r} needs nothing")


def _route_comment(event: IssueCommentEvent) -> Decision:
    body = event.comment.body
    if event.action != "created" or not (trust.asks_for_run(body) or trust.accept_command(body) is not None):
        return Decision(False, "comment holds no /roofwatch command")
    command = "/roofwatch accept" if trust.accept_command(body) is not None else "/roofwatch run"
    if event.issue.pull_request is None:
        return Decision(False, f"{command} on #{event.issue.number}, which is an issue, not a pull request")
    if not trust.is_maintainer(event.comment.author_association):
        return Decision(False, f"{command} from @{event.comment.user.login}, who has no write access "
                               f"({event.comment.author_association.lower()})")
    return Decision(True, f"#{event.issue.number}: {command} from @{event.comment.user.login}")


def _installation(session: Session, event: InstallationEvent) -> str:
    active = event.action in ("created", "new_permissions_accepted", "unsuspend")
    names = [r.full_name for r in event.repositories]
    rows = session.exec(select(Repository).where(Repository.full_name.in_(names))).all() if names else []  # type: ignore[attr-defined]
    if event.action == "deleted" or event.action == "suspend":
        rows = list(session.exec(select(Repository).where(Repository.installation_id == event.installation.id)).all())
    for row in rows:
        row.installation_id = event.installation.id if active else None
        session.add(row)
    known = sorted(r.full_name for r in rows)
    return (f"installation {event.installation.id} {event.action}: "
            f"{', '.join(known) if known else 'no registered repositories'}")


# -- background work ---------------------------------------------------------------------------


def handle_delivery(delivery_id: str, payload: Event) -> str:
    """Act on an accepted delivery; what happened is kept on the delivery's record.

    A failure is recorded too, a bug's included (which then raises on, with its traceback), so
    no delivery stays "accepted" with nothing to show for it. Only a database outage is left
    to the task's retries.
    """
    try:
        detail = handle(payload)
    except (pull_requests.PullRequestError, RoofwatchError) as exc:
        log.warning("delivery %s: %s", delivery_id, exc)
        _record_outcome(delivery_id, "failed", str(exc))
        return str(exc)
    except OperationalError:
        raise
    except Exception as exc:
        _record_outcome(delivery_id, "failed", f"roofwatch failed on it ({type(exc).__name__}); "
                                               "the service log has the traceback")
        raise
    _record_outcome(delivery_id, "accepted", detail)
    return detail


def _record_outcome(delivery_id: str, outcome: str, detail: str) -> None:
    with session_scope() as session:
        record = session.exec(select(WebhookDelivery).where(WebhookDelivery.delivery_id == delivery_id)).first()
        if record is None:
            log.warning("delivery %s: no record to keep its outcome (%s: %s)", delivery_id, outcome, detail)
            return
        record.outcome, record.detail = outcome, redact(f"{record.detail} → {detail}")[:4000]
        session.add(record)


def handle(payload: Event) -> str:
    """Do what an accepted delivery asks for (validated when it arrived: it is not checked again);
    returns what happened, for the delivery record."""
    with session_scope() as session:
        # Read once: every step below is given this reference, none reads the row again.
        repository = reference(session, repository_name(payload))
    registered_default = repository.default_branch
    if isinstance(payload, PushEvent):
        branch = payload.ref.removeprefix("refs/heads/")
        # A push to another tracked branch (ROOFWATCH_PUSH_BRANCHES) is measured off the default branch's history.
        default = payload.repository.default_branch or registered_default
        on_default = branch in {registered_default, payload.repository.default_branch}
        run_id = pushes.start(pushes.PushedHead(repository.id, branch, payload.after,
                                                default_branch="" if on_default else default))
        return f"run {run_id}" if run_id else "already measured"
    if isinstance(payload, PullRequestEvent):
        if payload.action == "closed":
            cancelled = pull_requests.cancel(repository.id, payload.number, "pull request closed")
            return f"cancelled runs {cancelled}" if cancelled else "nothing to cancel"
        # The label event carries the head the label was added on: the one the approval covers.
        approval = (approvals.Approval(payload.sender.login, payload.pull_request.head.sha)
                    if payload.action == "labeled" else None)
        return _pull_request(repository, payload.pull_request, approval)
    assert isinstance(payload, IssueCommentEvent)
    pull = _fetch_pull(repository, payload.issue.number)
    names = trust.accept_command(payload.comment.body)
    if names is not None:
        return _accept_missing(repository, pull, payload.comment.user.login, names)
    with session_scope() as session:
        approved_head = approvals.head_when(session, repository.id, pull.number, payload.comment.created_at,
                                            pull.head.sha)
    return _pull_request(repository, pull, approvals.Approval(payload.comment.user.login, approved_head),
                         rerun=True)


def _pull_request(repository: RepositoryRef, pull: PullRequest, approval: approvals.Approval | None,
                  rerun: bool = False) -> str:
    """Start the A/B of a pull request's head, or show why it waits for a maintainer."""
    waiting = trust.waiting_reason(pull, repository.full_name, repository.trust_policy)
    if waiting and not approval:
        label = get_settings().approval_label
        with session_scope() as session:
            ids = reporting.show_phase(
                session, repository, pull.head.sha, "waiting",
                f"waiting for a maintainer: {waiting}; add the label {label} or comment /roofwatch run",
                pull.html_url or dashboard_url())
        reporting.send(ids)
        return f"waiting for approval: {waiting}"
    if approval and not waiting and not rerun:
        return f"#{pull.number} needs no approval"
    if approval:
        refusal = trust.approval_refusal(pull, approval.approver, approval.head_sha) if waiting else None
        if refusal is None:  # asked last: the only check that costs a GitHub call
            refusal = trust.permission_refusal(approval.approver, _permission(repository, approval.approver))
        if refusal is not None:
            log.info("%s#%s: approval refused: %s", repository.full_name, pull.number, refusal)
            return f"approval refused: {refusal}"
    head = pull_requests.PullRequestHead(repository.id, pull.number, pull.head.sha, pull.base.ref, pull.base.sha,
                                         pull.title)
    run_id = pull_requests.start(head)
    approved = f" (approved by @{approval.approver})" if waiting and approval else ""
    return f"run {run_id}{approved}" if run_id else f"{pull.head.sha[:12]} already queued or running{approved}"


def _accept_missing(repository: RepositoryRef, pull: PullRequest, login: str, names: list[str]) -> str:
    """A maintainer's ``/roofwatch accept``: record it for the pull request and publish the verdict again.

    Like an approval, it counts only from someone GitHub says may write, and never from the
    pull request's author: the side being judged does not excuse its own missing benchmarks.
    """
    if login.casefold() == pull.user.login.casefold():
        return f"acceptance refused: @{login} wrote this pull request and cannot accept its missing benchmarks"
    refusal = trust.permission_refusal(login, _permission(repository, login))
    if refusal is not None:
        return f"acceptance refused: {refusal}"
    with session_scope() as session:
        comparison = pull_requests.latest_comparison(session, repository.id, pull.number, pull.head.sha)
        if comparison is None:
            return f"nothing to accept: no finished comparison of #{pull.number}'s head {pull.head.sha[:12]}"
        try:
            accepted = acceptances.accept(session, comparison, login, "comment", names or None)
        except LookupError as exc:
            return f"nothing accepted: {exc}"
        comparison_id = comparison.id
    assert comparison_id is not None
    pull_requests.finish(comparison_id)
    return f"@{login} accepted {len(accepted)} missing benchmark(s) on #{pull.number}"


def _permission(repository: RepositoryRef, login: str) -> str:
    try:
        return approvals.permission(repository.full_name, repository.installation_id, login)
    except GitHubError as exc:
        raise pull_requests.PullRequestError(f"cannot read @{login}'s permission from GitHub: {exc}") from exc


def _fetch_pull(repository: RepositoryRef, number: int) -> PullRequest:
    """The pull request a ``/roofwatch run`` comment is on, as GitHub has it now."""
    try:
        with GitHubClient.from_settings(get_settings(), repository.installation_id) as client:
            return PullRequest.model_validate(client.pull_request(repository.full_name, number))
    except GitHubError as exc:
        raise pull_requests.PullRequestError(f"cannot read pull request #{number} from GitHub: {exc}") from exc
