"""Compiled artifacts in and out of the database: per run, per commit, per kernel over history."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import insert
from sqlmodel import Session, col, select

from roofwatch.common.envelope import CompiledArtifactRecord, RoundRecord, SuiteResult
from roofwatch.service.analysis.causes import compiled_sides
from roofwatch.service.analysis.compiled import Artifact, BinaryVerdict, binary_verdict, for_tests
from roofwatch.service.core.models import Commit, CompiledArtifact, Run

# What a worker measures but the database does not keep: how long the compile took on that host.
NOT_STORED = frozenset({"compile_s"})
# The fields ``roofwatch artifacts --format json`` prints, in the record's order: every stored one.
PUBLIC_FIELDS = tuple(name for name in CompiledArtifactRecord.model_fields if name not in NOT_STORED)


def store(session: Session, run_id: int, suites: Sequence[SuiteResult]) -> int:
    """Insert the artifacts of the run's compile suites; how many."""
    rows = [{"run_id": run_id, "suite": suite.name,
             **artifact.model_dump(exclude=set(NOT_STORED))}
            for suite in suites if suite.kind == "compile" for artifact in suite.artifacts]
    if rows:
        session.execute(insert(CompiledArtifact), rows)
    return len(rows)


def for_run(session: Session, run_id: int) -> list[CompiledArtifact]:
    return list(session.exec(select(CompiledArtifact).where(CompiledArtifact.run_id == run_id)
                             .order_by(col(CompiledArtifact.kernel), col(CompiledArtifact.specialization),
                                       col(CompiledArtifact.target))).all())


def latest_run_with_artifacts(session: Session, repository_id: int, sha: str) -> Run | None:
    """The newest run of ``sha`` that stored compiled artifacts (any device: the code does not depend on it)."""
    return session.exec(
        select(Run).join(Commit, col(Run.commit_id) == col(Commit.id))
        .where(Run.repository_id == repository_id, Commit.sha == sha,
               select(CompiledArtifact.id).where(CompiledArtifact.run_id == Run.id).exists())
        .order_by(col(Run.id).desc())).first()


def latest_run(session: Session, repository_id: int) -> Run | None:
    """The run of the newest commit that stored compiled artifacts."""
    return session.exec(
        select(Run).join(Commit, col(Run.commit_id) == col(Commit.id))
        .where(Run.repository_id == repository_id,
               select(CompiledArtifact.id).where(CompiledArtifact.run_id == Run.id).exists())
        .order_by(col(Commit.committed_at).desc(), col(Run.id).desc())).first()


def for_commit(session: Session, repository_id: int, sha: str) -> list[CompiledArtifact]:
    run = latest_run_with_artifacts(session, repository_id, sha)
    return for_run(session, run.id) if run and run.id is not None else []


def verdict_between(session: Session, repository_id: int, good_sha: str, bad_sha: str,
                    tests: Sequence[str] | None = None) -> BinaryVerdict:
    """Did the kernels change from ``good_sha`` to ``bad_sha``? Only those launched by ``tests`` when given."""
    base: Sequence[Artifact] = for_commit(session, repository_id, good_sha)
    head: Sequence[Artifact] = for_commit(session, repository_id, bad_sha)
    if tests is not None:
        base, head = for_tests(base, tests), for_tests(head, tests)
    return binary_verdict(base, head)


@dataclass(frozen=True)
class HistoryPoint:
    sha: str
    message: str
    artifact: CompiledArtifact


def kernel_history(session: Session, repository_id: int, kernel: str, limit: int = 200) -> list[HistoryPoint]:
    """One kernel's artifacts over the commits that compiled it, oldest first (latest run per commit)."""
    rows = session.exec(
        select(CompiledArtifact, Run, Commit)
        .where(CompiledArtifact.run_id == Run.id, Run.commit_id == Commit.id,
               Run.repository_id == repository_id, CompiledArtifact.kernel == kernel)
        .order_by(col(Commit.committed_at).desc(), col(Run.id).desc())).all()
    latest_run: dict[int, int] = {}
    points: list[HistoryPoint] = []
    for artifact, run, commit in rows:
        assert commit.id is not None and run.id is not None
        if latest_run.setdefault(commit.id, run.id) != run.id:
            continue
        points.append(HistoryPoint(commit.sha, commit.message.splitlines()[0] if commit.message else "", artifact))
    seen_commits = list(dict.fromkeys(p.sha for p in points))[:limit]
    kept = set(seen_commits)
    return list(reversed([p for p in points if p.sha in kept]))


def public(artifact: CompiledArtifact) -> dict[str, object]:
    return {name: getattr(artifact, name) for name in PUBLIC_FIELDS}


def ab_summary(rounds: Sequence[RoundRecord]) -> dict[str, object]:
    """What the compiled code did between an A/B's base and head (round 0 runs every suite of both)."""
    base, head = compiled_sides(rounds)
    verdict = binary_verdict(base, head)
    if verdict.identical is None:
        return {}
    return {"identical": verdict.identical, "targets": list(verdict.targets),
            "kernels": len({a.kernel for a in head}), "diffs": [d.as_dict() for d in verdict.diffs]}
