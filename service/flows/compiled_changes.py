"""Compiled code in the main-branch flow: flag binaries that changed for the worse before any
timing, explain timing changes by their binaries, and hold back timing moves on identical code.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, select

from roofwatch.common.vocabulary import OPEN_STATES, ChangeKind
from roofwatch.service.analysis import lifecycle
from roofwatch.service.analysis.compiled import Decision, binary_verdict, confirm_timing_change, diff
from roofwatch.service.core.models import Change, Commit, Run
from roofwatch.service.records import changes, compiled_artifacts
from roofwatch.service.records.runs import find_commit


def flag(session: Session, run: Run, head_commit: Commit) -> list[int]:
    """A ``compiled-code`` change for each specialization whose binary changed in a way that matters.

    The baseline is the first parent's compiled code (any device: compiling does not depend on
    it), so the flag names the commit exactly, with no bisection and no GPU.
    """
    head = compiled_artifacts.for_run(session, run.id) if run.id is not None else []
    if not head:
        return []
    parent = next((p for p in head_commit.parents
                   if compiled_artifacts.latest_run_with_artifacts(session, run.repository_id, p)), None)
    if parent is None:
        return []
    base = compiled_artifacts.for_commit(session, run.repository_id, parent)
    if binary_verdict(base, head).identical is None:
        return []  # another toolchain: a new epoch, not a change of the code
    good = find_commit(session, run.repository_id, parent)
    created: list[int] = []
    for item in diff(base, head):
        test_id = f"{item.kernel}[{item.specialization}] {item.target}"
        if not item.matters or session.exec(select(Change).where(
                Change.repository_id == run.repository_id, Change.kind == ChangeKind.COMPILED_CODE,
                Change.test_id == test_id, col(Change.state).in_(OPEN_STATES))).first():
            continue
        # Certain, like a test outcome: the binaries of the two commits are what they are.
        change = changes.record(session, repository_id=run.repository_id, device_id=run.device_id,
                                kind=ChangeKind.COMPILED_CODE, phase=lifecycle.CONFIRMED, good=good, bad=head_commit,
                                run_id=run.id, suite="compiled", test_id=test_id,
                                first_bad_commit_id=head_commit.id,
                                details={"compiled": [item.as_dict()], "explanation": item.line()})
        created.append(change.id)  # type: ignore[arg-type]
    return created


def timing_decision(session: Session, repository_id: int, good_sha: str, bad_sha: str, benchmark: str,
                    change_pct: float | None, threshold_pct: float | None) -> tuple[Decision, dict[str, Any]]:
    """Whether a confirmed timing change is reported, and what its kernels' binaries say (for its details)."""
    verdict = compiled_artifacts.verdict_between(session, repository_id, good_sha, bad_sha, [benchmark])
    decision = confirm_timing_change(verdict, change_pct, threshold_pct)
    details: dict[str, Any] = {}
    if verdict.identical is not None:
        details = {"binary_identical": verdict.identical, "explanation": decision.note,
                   "compiled": [d.as_dict() for d in verdict.diffs]}
    return decision, details
