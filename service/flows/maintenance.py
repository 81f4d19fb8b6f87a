"""What a maintainer's terminal commands do to the records: register a repository, keep its suites,
make and revoke upload tokens, triage a change, and read the changes and compiled kernels back.

The CLI parses the arguments and prints; each function here opens its own transaction, so a
command that fails half-way leaves nothing half-written. Rows come back detached (sessions keep
their attributes after commit), for the CLI to print. Every lookup by name raises a
``RoofwatchError`` that names what was asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlmodel import Session, col, select

from roofwatch.service.core.db import session_scope
from roofwatch.service.core.errors import ArtifactLookupError
from roofwatch.service.core.models import Change, Commit, CompiledArtifact, Repository, SuiteConfig, UploadToken
from roofwatch.service.flows.repositories import resolve_repository
from roofwatch.service.records import compiled_artifacts, suite_configs, triage, upload_tokens
from roofwatch.service.records.queries import change_rows
from roofwatch.service.records.repositories import find_repository, register


@dataclass(frozen=True)
class Registered:
    repository: Repository
    suites: SuiteConfig | None  # the suites file stored with it (``--suites``), if any


def add_repository(full_name: str, clone_url: str, default_branch: str = "main",
                   trust_policy: str = "maintainers-only", suite_network: bool | None = None,
                   suites_file: Path | None = None) -> Registered:
    """Register (or update) a repository, with its suites file in the same transaction."""
    with session_scope() as session:
        repository = register(session, full_name, clone_url, default_branch, trust_policy, suite_network)
        stored = _store_suites(session, repository, suites_file) if suites_file is not None else None
    return Registered(repository, stored)


def set_suites(full_name: str, suites_file: Path) -> SuiteConfig:
    """Keep a new version of a registered repository's suites; every version is kept."""
    with session_scope() as session:
        repository = find_repository(session, full_name)
        return _store_suites(session, repository, suites_file)


def _store_suites(session: Session, repository: Repository, suites_file: Path) -> SuiteConfig:
    return suite_configs.store(session, repository, suites_file.read_text(encoding="utf-8"), suites_file.name)


def issue_token(repo: str, label: str) -> tuple[UploadToken, str, Repository]:
    """A new upload token for ``repo``: its row, the token itself (never stored) and the repository."""
    with session_scope() as session:
        repository = find_repository(session, repo)
        row, token = upload_tokens.issue(session, repository, label)
    return row, token, repository


def tokens(repo: str) -> list[UploadToken]:
    with session_scope() as session:
        return upload_tokens.listed(session, find_repository(session, repo))


def revoke_token(repo: str, token_id: int) -> bool:
    """False when ``repo`` has no live token ``token_id``."""
    with session_scope() as session:
        return upload_tokens.revoke(session, find_repository(session, repo), token_id)


def set_triage(change_id: int, state: str, note: str, actor: str, repo: str | None = None) -> Change:
    """Move a change to ``state``; with ``repo``, only a change of that repository."""
    with session_scope() as session:
        within = find_repository(session, repo) if repo is not None else None
        return triage.set_state(session, change_id, state, note, actor=actor, within=within)


def changes(repo: str | None = None) -> list[dict[str, Any]]:
    """The detected changes, of one repository or of all, in ``regressions --format json``'s contract."""
    with session_scope() as session:
        return change_rows(session, find_repository(session, repo).id if repo is not None else None)


def artifacts_of(repo: str, commit: str) -> tuple[str, list[CompiledArtifact]]:
    """The full SHA ``commit`` (a SHA or a unique prefix) names, and its latest run's compiled kernels."""
    prefix = commit.strip().lower()
    if not prefix or any(c not in "0123456789abcdef" for c in prefix):
        raise ArtifactLookupError(f"{commit!r} is not a commit SHA")
    with session_scope() as session:
        repository = resolve_repository(session, repo)
        shas = session.exec(select(Commit.sha).where(Commit.repository_id == repository.id,
                                                     col(Commit.sha).startswith(prefix, autoescape=True))).all()
        if not shas:
            raise ArtifactLookupError(f"no commit {commit} of {repository.full_name} has been run")
        if len(set(shas)) > 1:
            raise ArtifactLookupError(f"{commit} is ambiguous in {repository.full_name}: {', '.join(sorted(shas)[:5])}")
        sha = shas[0]
        assert repository.id is not None
        rows = compiled_artifacts.for_commit(session, repository.id, sha)
    if not rows:
        raise ArtifactLookupError(f"commit {sha[:12]} has no compiled artifacts (does it declare a kind = \"compile\" suite?)")
    return sha, rows


def artifact_listing(sha: str, rows: list[CompiledArtifact]) -> list[dict[str, object]]:
    """``roofwatch artifacts --format json``: each kernel's public fields, with the commit."""
    return [{"commit": sha, **compiled_artifacts.public(row)} for row in rows]
