"""Find the repository a user means: a registered name, a local path or a clone URL."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

from sqlmodel import Session, select

from roofwatch.service.core.errors import UnknownRepository
from roofwatch.service.core.models import TRUST_POLICIES, Repository
from roofwatch.workers.checkout import ensure_mirror, is_local_path

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


def _is_url(spec: str) -> bool:
    return "://" in spec or spec.startswith("git@")


def registered_repository(session: Session, spec: str) -> Repository | None:
    """The repository ``spec`` names, the way ``run`` accepts it (``OWNER/NAME``, path, URL), if registered."""
    by_name = session.exec(select(Repository).where(Repository.full_name == spec)).first()
    if by_name is not None:
        return by_name
    if _is_url(spec):
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

    For read-only commands: unlike ``resolve_repository`` it never registers anything.
    """
    repository = registered_repository(session, spec)
    if repository is None:
        raise UnknownRepository(
            f"no repository {spec!r} is known: measure it with `roofwatch run --repo {spec}` "
            "or register it with `roofwatch repo add OWNER/NAME --clone-url URL`"
        )
    return repository


def resolve_repository(session: Session, spec: str) -> Repository:
    """A registered ``OWNER/NAME``, or a path / URL registered on first use."""
    by_name = session.exec(select(Repository).where(Repository.full_name == spec)).first()
    if by_name is not None:
        return by_name
    if is_local_path(spec):
        path = Path(spec).resolve()
        if not _is_git_repository(path):
            kind = "a folder" if path.is_dir() else "a file"
            raise UnknownRepository(f"{spec!r} is {kind} but not a git repository "
                                    "(give the folder a `git clone` made, or run `git init` in it and commit)")
        clone_url = str(path)
        by_url = session.exec(select(Repository).where(Repository.clone_url == clone_url)).first()
        if by_url is not None:
            return by_url
        name = f"local/{path.name}"
        if session.exec(select(Repository).where(Repository.full_name == name)).first():
            name = f"local/{path.name}-{hashlib.sha256(clone_url.encode()).hexdigest()[:6]}"
        return register(session, name, clone_url, default_branch="HEAD")
    if _is_url(spec):
        by_url = session.exec(select(Repository).where(Repository.clone_url == spec)).first()
        if by_url is not None:
            return by_url
        match = URL_NAME.search(spec)
        if not match:
            raise UnknownRepository(f"cannot tell OWNER/NAME from the URL {spec!r}")
        return register(session, f"{match['owner']}/{match['name']}", spec)
    raise UnknownRepository(
        f"{spec!r} is not a registered repository, an existing path or a clone URL "
        "(register it with `roofwatch repo add OWNER/NAME --clone-url URL`)"
    )


def _is_git_repository(path: Path) -> bool:
    """A working tree or a bare repository git itself recognises at ``path``."""
    if not path.is_dir():
        return False
    done = subprocess.run(["git", "-C", str(path), "rev-parse", "--git-dir"], capture_output=True, text=True,
                          check=False)
    return done.returncode == 0


def mirror_and_source(repository: Repository, mirrors_dir: Path) -> tuple[Path, Path]:
    """The fetched mirror, and where the user's revision names mean what they see.

    For a local checkout that is the checkout itself (``HEAD~3``, its branches); otherwise the mirror.
    """
    mirror = ensure_mirror(mirrors_dir, repository.clone_url)
    return mirror, Path(repository.clone_url) if is_local_path(repository.clone_url) else mirror
