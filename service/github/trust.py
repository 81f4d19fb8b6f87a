"""Who may make roofwatch run their code on a GPU host without a maintainer looking first.

A pull request's code runs on shared GPU hosts, so a fork, or an author GitHub does not list
as owner, member or collaborator, waits until a maintainer approves that head — by adding the
approval label or commenting ``/roofwatch run``. An approval covers the head it was given
for: a later push from the same untrusted author waits again.

``author_association`` is GitHub's own classification in the payload; ``COLLABORATOR``
includes collaborators with read access only, which is why fork pull requests always wait.
"""

from __future__ import annotations

import re

from service.core.models import TRUST_POLICIES
from service.github.payloads import PullRequest

MAINTAINER_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
POLICIES = TRUST_POLICIES
COMMAND = re.compile(r"^\s*/roofwatch\s+run\b", re.IGNORECASE | re.MULTILINE)


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
