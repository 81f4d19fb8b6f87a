"""The registered repositories: register one, and find the one a name, a path or a clone URL means.

No git here: registering what a path or URL names on first use (which needs git to say it is a
repository, and a mirror fetched) is ``roofwatch.service.flows.repositories``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sqlmodel import Session, select

from roofwatch.service.core.errors import UnknownRepository
from roofwatch.service.core.models import TRUST_POLICIES, Repository

URL_NAME = re.compile(r"[:/](?P<owner>[\w.-]+)/(?P<name>[\w.-]+?)(?:\.git)?/?$")


def register(session: Session, full_name: str, clone_url: str, default_branch: str = "main",
             trust_policy: str = "maintainers-only", suite_network: bool | None = None) -> Repository:
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", full_name):
        raise UnknownRepository(f"repository names look like OWNER/NAME, got {full_name!r}")
    if trust_policy not in TRUST_POLICIES:
        raise UnknownRepository(f"trust policy is one of {', '.join(TRUST_POLICIES)}, got {trust_policy!r}")
    repository = session.exec(select(Repository).where(Repository.full_name == full_name)).first()
    if repository is None:
        repository = Repository(full_name=full_name, clone_url=clone_url, default_branch=default_branch,
                                trust_policy=trust_policy)
    else:
        repository.clone_url, repository.default_branch = clone_url, default_branch
        repository.trust_policy = trust_policy
    if suite_network is not None:
        repository.suite_network = suite_network
    session.add(repository)
    session.flush()
    return repository


def is_url(spec: str) -> bool:
    return "://" in spec or spec.startswith("git@")


@dataclass(frozen=True)
class RepositoryRef:
    """A registered repository as a flow carries it: read once, passed down, never a live row."""

    id: int
    full_name: str
    clone_url: str
    default_branch: str
    trust_policy: str
    installation_id: int | None

    @classmethod
    def of(cls, row: Repository) -> RepositoryRef:
        assert row.id is not None, "a reference is to a stored repository"
        return cls(row.id, row.full_name, row.clone_url, row.default_branch, row.trust_policy, row.installation_id)


def reference(session: Session, full_name: str) -> RepositoryRef:
    """The registered repository ``full_name``, as a reference; an error naming it when there is none."""
    row = session.exec(select(Repository).where(Repository.full_name == full_name)).first()
    if row is None:
        raise UnknownRepository(f"repository {full_name} is not registered")
    return RepositoryRef.of(row)


def registered_repository(session: Session, spec: str) -> Repository | None:
    """The repository ``spec`` names, the way ``run`` accepts it (``OWNER/NAME``, path, URL), if registered."""
    by_name = session.exec(select(Repository).where(Repository.full_name == spec)).first()
    if by_name is not None:
        return by_name
    if is_url(spec):
        by_url = session.exec(select(Repository).where(Repository.clone_url == spec)).first()
        if by_url is not None or not (match := URL_NAME.search(spec)):
            return by_url
        return session.exec(
            select(Repository).where(Repository.full_name == f"{match['owner']}/{match['name']}")).first()
    # A path `run` registered is found even after the checkout moved away: its resolved path is the key.
    try:
        clone_url = str(Path(spec).expanduser().resolve())
    except (OSError, ValueError, RuntimeError):  # a NUL byte, a symlink loop, an unknown ~user: no such path
        return None
    return session.exec(select(Repository).where(Repository.clone_url == clone_url)).first()


def find_repository(session: Session, spec: str) -> Repository:
    """The registered repository ``spec`` names; an error naming ``spec`` when there is none.

    For read-only commands: unlike ``flows.repositories.resolve_repository`` it never registers anything.
    """
    repository = registered_repository(session, spec)
    if repository is None:
        raise UnknownRepository(
            f"no repository {spec!r} is known: measure it with `roofwatch run --repo {spec}` "
            "or register it with `roofwatch repo add OWNER/NAME --clone-url URL`"
        )
    return repository
