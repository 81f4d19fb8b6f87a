"""Who may make roofwatch run their code on a GPU host without a maintainer looking first.

A pull request's code runs on shared GPU hosts, so a fork, or an author GitHub does not list
as owner, member or collaborator, waits until a maintainer approves that head — by adding the
approval label or commenting ``/roofwatch run``. An approval covers the head it was given
for: a later push from the same untrusted author waits again.

``author_association`` is GitHub's own classification in the payload; ``COLLABORATOR``
includes collaborators with read access only and ``MEMBER`` means organisation membership,
which is why fork pull requests always wait, and why an approval counts only when GitHub's
permission endpoint says the approver can write to the repository. The association serves
only to drop commands that cannot come from a maintainer without asking GitHub.
"""

from __future__ import annotations

import re

from roofwatch.service.core.models import TRUST_POLICIES
from roofwatch.service.github.payloads import PullRequest

MAINTAINER_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
# ``permission`` of GET /repos/{owner}/{repo}/collaborators/{username}/permission: GitHub maps
# maintain to write and triage to read there; "maintain" is listed in case it ever is not.
APPROVING_PERMISSIONS = frozenset({"admin", "maintain", "write"})
POLICIES = TRUST_POLICIES
COMMAND = re.compile(r"^\s*/roofwatch\s+run\b", re.IGNORECASE | re.MULTILINE)
# ``/roofwatch accept`` (every benchmark missing on the head) or ``/roofwatch accept NAME …`` on a
# line of its own. Names are pytest-benchmark names, which hold no whitespace.
ACCEPT = re.compile(r"^[ \t]*/roofwatch[ \t]+accept\b([^\n]*)$", re.IGNORECASE | re.MULTILINE)
ACCEPT_NAMES = 100  # names one command may list


def waiting_reason(pull: PullRequest, repository: str, policy: str) -> str | None:
    """Why ``pull`` must wait for a maintainer, or None when it may run now."""
    if policy == "everyone":
        return None
    head_repo = pull.head.repo.full_name if pull.head.repo else None
    if head_repo != repository:
        source = head_repo or "a deleted fork"
        return f"from a fork ({source})"
    if pull.author_association not in MAINTAINER_ASSOCIATIONS:
        return f"@{pull.user.login} has no write access ({pull.author_association.lower()})"
    return None


def is_maintainer(association: str) -> bool:
    return association in MAINTAINER_ASSOCIATIONS


def asks_for_run(body: str | None) -> bool:
    """True when a comment holds the ``/roofwatch run`` command on a line of its own."""
    return bool(body and COMMAND.search(body))


def accept_command(body: str | None) -> list[str] | None:
    """The names a ``/roofwatch accept`` command lists ([] for all), or None when the comment holds none."""
    found = ACCEPT.search(body or "")
    if found is None:
        return None
    return found.group(1).split()[:ACCEPT_NAMES]


def approval_refusal(pull: PullRequest, approver: str, approved_head: str | None) -> str | None:
    """Why an approval by ``approver`` for ``approved_head`` cannot start ``pull``'s current head.

    Checked before GitHub is asked for the approver's permission: the author of a pull
    request never approves their own code, and an approval given for one head (the one the
    maintainer looked at) says nothing about a head pushed after it.
    """
    if approver.casefold() == pull.user.login.casefold():
        return f"@{approver} wrote this pull request and cannot approve it"
    if approved_head is None:
        return (f"roofwatch had not seen a head of #{pull.number} when @{approver} approved; "
                f"approve {pull.head.sha[:7]} again")
    if approved_head != pull.head.sha:
        return (f"@{approver} approved {approved_head[:7]}, but the head is now {pull.head.sha[:7]}; "
                "a new head needs a new approval")
    return None


def permission_refusal(approver: str, permission: str) -> str | None:
    """Why ``permission`` (GitHub's answer for ``approver``) is not enough to approve, or None."""
    if permission in APPROVING_PERMISSIONS:
        return None
    return f"@{approver} has {permission or 'no'} permission on the repository; approval needs write, maintain or admin"
