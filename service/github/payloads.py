"""The parts of GitHub's webhook payloads roofwatch acts on, validated on arrival.

Only the fields roofwatch reads are declared; everything else GitHub sends is ignored, so a
payload that gains fields keeps working, and one that lacks a field roofwatch needs is a
clear 400 instead of a crash halfway through handling it.

The declared fields are strict: ``"21"`` is not the number 21 and ``true`` is not 1, as
GitHub never sends either. Numbers are bounded where they are declared (ids fit a signed
64-bit integer, pull request numbers a signed 32-bit one, as the database columns do), and
``parse`` refuses what no GitHub payload holds before any model sees it: nesting deeper than
``MAX_DEPTH``, integer literals longer than ``MAX_INTEGER_DIGITS``, ``NaN`` and ``Infinity``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from roofwatch.service.core.errors import PayloadError

# GitHub's payloads nest about 8 levels; the JSON decoder recurses once per level.
MAX_DEPTH = 64
# A signed 64-bit integer has at most 19 digits; GitHub's ids and sizes all fit one.
MAX_INTEGER_DIGITS = 20

# A GitHub id (repository, installation, hook, comment): positive, a signed 64-bit integer.
GitHubId = Annotated[int, Field(ge=1, le=2**63 - 1)]
# Pull request and issue numbers: positive and far below 2**31 (the ``run.pr_number`` column).
IssueNumber = Annotated[int, Field(ge=1, le=2**31 - 1)]


def _timestamp_text(value: object) -> object:
    # GitHub writes these as ISO 8601 text; a bare number would be read as a Unix time.
    if not isinstance(value, str | datetime):
        raise ValueError("must be an ISO 8601 timestamp string")
    return value


Timestamp = Annotated[datetime, Field(strict=False), BeforeValidator(_timestamp_text)]


def _integer(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INTEGER_DIGITS:
        raise PayloadError(f"an integer of {digits} digits is out of range (GitHub sends at most 64-bit integers)")
    return int(text)


def _constant(name: str) -> Any:
    raise PayloadError(f"{name} is not a JSON number")


def _too_deep(value: object) -> bool:
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return False


def parse(body: bytes) -> dict[str, Any]:
    """The JSON object in a webhook body; ``PayloadError`` says why when there is none."""
    try:
        data = json.loads(body, parse_int=_integer, parse_constant=_constant)
    except PayloadError:
        raise
    except RecursionError:
        raise PayloadError(f"payload nests deeper than {MAX_DEPTH} levels") from None
    except UnicodeDecodeError as exc:
        raise PayloadError(f"payload is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    except ValueError as exc:  # json.JSONDecodeError and int()'s own limits
        raise PayloadError(f"payload is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise PayloadError("payload must be a JSON object")
    if _too_deep(data):
        raise PayloadError(f"payload nests deeper than {MAX_DEPTH} levels")
    return data


class _Payload(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


class User(_Payload):
    login: str


class RepositoryRef(_Payload):
    full_name: str
    clone_url: str = ""
    default_branch: str = "main"


class Installation(_Payload):
    id: GitHubId


class Label(_Payload):
    name: str


class Branch(_Payload):
    ref: str
    sha: str = Field(pattern=r"^[0-9a-f]{40}$")
    # None when the fork a pull request came from has been deleted.
    repo: RepositoryRef | None = None


class PullRequest(_Payload):
    number: IssueNumber
    title: str = ""
    html_url: str = ""
    user: User
    author_association: str = "NONE"
    head: Branch
    base: Branch
    labels: list[Label] = Field(default_factory=list)


class PullRequestEvent(_Payload):
    action: str
    number: IssueNumber
    pull_request: PullRequest
    repository: RepositoryRef
    sender: User
    label: Label | None = None
    installation: Installation | None = None


class PushEvent(_Payload):
    ref: str
    after: str = Field(pattern=r"^[0-9a-f]{40}$")
    deleted: bool = False
    repository: RepositoryRef
    installation: Installation | None = None


class IssueRef(_Payload):
    number: IssueNumber
    # Present (an object of URLs) only when the issue is a pull request.
    pull_request: dict[str, object] | None = None


class Comment(_Payload):
    body: str | None = None
    user: User
    author_association: str = "NONE"
    # When the command was made: an approval covers the head the pull request had then.
    created_at: Timestamp | None = None


class IssueCommentEvent(_Payload):
    action: str
    issue: IssueRef
    comment: Comment
    repository: RepositoryRef
    installation: Installation | None = None


class InstallationEvent(_Payload):
    action: str
    installation: Installation
    repositories: list[RepositoryRef] = Field(default_factory=list)
    sender: User | None = None


class PingEvent(_Payload):
    zen: str = ""
    hook_id: GitHubId | None = None
    repository: RepositoryRef | None = None


# The payload model of each event roofwatch handles; every other event is acknowledged and ignored.
EVENT_MODELS: dict[str, type[_Payload]] = {
    "ping": PingEvent,
    "push": PushEvent,
    "pull_request": PullRequestEvent,
    "issue_comment": IssueCommentEvent,
    "installation": InstallationEvent,
}

Event = PingEvent | PushEvent | PullRequestEvent | IssueCommentEvent | InstallationEvent


def for_queue(event: _Payload) -> dict[str, Any]:
    """What travels on the queue for an accepted delivery: the event as it was validated on arrival,
    the fields roofwatch reads and nothing else (a push's payload is mostly commits and URLs it never
    reads: tens of kilobytes in, under one out)."""
    return event.model_dump(mode="json")


def from_queue(name: str, queued: dict[str, Any]) -> Event:
    """The event ``for_queue`` sent, read back at the other end of the queue.

    It was validated when it arrived, so this only rebuilds the model from roofwatch's own JSON; a
    message queued before an upgrade (GitHub's whole payload) is read the same way, its unknown
    fields ignored.
    """
    return EVENT_MODELS[name].model_validate(queued)  # type: ignore[return-value]
