"""Which repository a user means, registered on first use: a registered name, a local checkout, a clone URL.

``roofwatch run --repo .`` and ``roofwatch compare`` take any of the three. A path must be a
repository git recognises; a URL must say its ``OWNER/NAME``. What is registered is what could
be fetched: the CLI registers after the mirror is there (``mirror_and_source``).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

from sqlmodel import Session, select

from roofwatch.git.checkout import ensure_mirror, is_local_path
from roofwatch.service.core.errors import UnknownRepository
from roofwatch.service.core.models import Repository
from roofwatch.service.records.repositories import URL_NAME, is_url, register


def resolve_repository(session: Session, spec: str) -> Repository:
    """A registered ``OWNER/NAME``, or a path / URL registered on first use."""
    repository = repository_for(session, spec)
    if repository.id is None:
        repository = register(session, repository.full_name, repository.clone_url, repository.default_branch)
    return repository


def repository_for(session: Session, spec: str) -> Repository:
    """The registered repository ``spec`` names, or the one it would register, not stored (``id`` None).

    A caller that fetches first (``roofwatch run``) registers only what it could fetch. A URL is
    never a way to change a registered repository: one whose ``OWNER/NAME`` is registered with
    another clone URL is refused, its clone URL and trust policy untouched (``repo add`` changes them).
    """
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
        return _unregistered(name, clone_url, default_branch="HEAD")
    if is_url(spec):
        by_url = session.exec(select(Repository).where(Repository.clone_url == spec)).first()
        if by_url is not None:
            return by_url
        match = URL_NAME.search(spec)
        if not match:
            raise UnknownRepository(f"cannot tell OWNER/NAME from the URL {spec!r}")
        name = f"{match['owner']}/{match['name']}"
        if session.exec(select(Repository).where(Repository.full_name == name)).first() is not None:
            raise UnknownRepository(
                f"{name} is registered with another clone URL, so {spec!r} is not run as {name}: run it by name "
                f"(`roofwatch run --repo {name}`), or point {name} at this URL with "
                f"`roofwatch repo add {name} --clone-url URL`")
        return _unregistered(name, spec)
    raise UnknownRepository(
        f"{spec!r} is not a registered repository, an existing path or a clone URL "
        "(register it with `roofwatch repo add OWNER/NAME --clone-url URL`)"
    )


def _unregistered(full_name: str, clone_url: str, default_branch: str = "main") -> Repository:
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", full_name):
        raise UnknownRepository(f"repository names look like OWNER/NAME, got {full_name!r}")
    return Repository(full_name=full_name, clone_url=clone_url, default_branch=default_branch)


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
