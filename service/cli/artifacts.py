"""``roofwatch artifacts``: the compiled kernels stored for one commit."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from sqlmodel import Session, col, select

from roofwatch.service.core.errors import ArtifactLookupError
from roofwatch.service.core.models import Commit, CompiledArtifact
from roofwatch.service.flows.repositories import resolve_repository
from roofwatch.service.records import compiled_artifacts


def artifacts_of(session: Session, repo: str, commit: str) -> tuple[str, list[CompiledArtifact]]:
    """The full SHA ``commit`` (a SHA or a unique prefix) names, and its latest run's artifacts."""
    repository = resolve_repository(session, repo)
    prefix = commit.strip().lower()
    if not prefix or any(c not in "0123456789abcdef" for c in prefix):
        raise ArtifactLookupError(f"{commit!r} is not a commit SHA")
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


def render(console: Console, sha: str, rows: list[CompiledArtifact]) -> None:
    table = Table("kernel", "specialization", "target", "regs", "spills B", "shared B", "SASS", "tensor core",
                  "hash", title=f"compiled artifacts of {sha[:12]} ({rows[0].toolchain})")
    for row in rows:
        if row.status != "compiled":
            table.add_row(row.kernel.rsplit(".", 1)[-1], row.specialization, row.target,
                          f"[red]failed[/]: {row.reason[:120]}", "", "", "", "", "")
            continue
        tensor = ", ".join(f"{name} {row.instructions[name]}" for name in ("wgmma", "mma", "tcgen05_mma")
                           if row.instructions.get(name))
        table.add_row(row.kernel.rsplit(".", 1)[-1], row.specialization, row.target, str(row.registers),
                      str(row.spill_bytes), str(row.shared_bytes), str(row.sass_instructions), tensor or "–",
                      row.sass_hash[:12])
    console.print(table)
