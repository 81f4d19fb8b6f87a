"""The parts of GitHub's webhook payloads roofwatch acts on, validated on arrival.

Only the fields roofwatch reads are declared; everything else GitHub sends is ignored, so a
payload that gains fields keeps working, and one that lacks a field roofwatch needs is a
clear 400 instead of a crash halfway through handling it.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

ZERO_SHA = "0" * 40


class _Payload(BaseModel):
    model_config = ConfigDict(extra="ignore")


class User(_Payload):
    login: str


class RepositoryRef(_Payload):
    full_name: str
    clone_url: str = ""
    default_branch: str = "main"


class Installation(_Payload):
    id: int


class Label(_Payload):
    name: str


class Branch(_Payload):
    ref: str
    sha: str = Field(pattern=r"^[0-9a-f]{40}$")
    # None when the fork a pull request came from has been deleted.
    repo: RepositoryRef | None = None


class PullRequest(_Payload):
    number: int
    title: str = ""
    html_url: str = ""
    user: User
    author_association: str = "NONE"
    head: Branch
    base: Branch
    labels: list[Label] = Field(default_factory=list)


class PullRequestEvent(_Payload):
    action: str
    number: int
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
    number: int
    # Present (an object of URLs) only when the issue is a pull request.
    pull_request: dict[str, object] | None = None


class Comment(_Payload):
    body: str | None = None
    user: User
    author_association: str = "NONE"
    # When the command was made: an approval covers the head the pull request had then.
    created_at: datetime | None = None


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
    hook_id: int | None = None
    repository: RepositoryRef | None = None


# The payload model of each event roofwatch handles; every other event is acknowledged and ignored.
EVENT_MODELS: dict[str, type[_Payload]] = {
    "ping": PingEvent,
    "push": PushEvent,
    "pull_request": PullRequestEvent,
    "issue_comment": IssueCommentEvent,
    "installation": InstallationEvent,
}
