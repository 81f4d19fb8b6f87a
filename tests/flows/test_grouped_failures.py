"""Correctness changes on a branch's history are one per test function and breaking commit.

A history written row by row (runs and test outcomes, no suites run), analysed by the real
detection flow: parametrizations one commit broke are one change listing them; one broken by a
later commit is a change of its own; changes recorded per parametrization before failures were
grouped are folded into one, not doubled; a group is fixed once all of its tests pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import Session, col, select

from roofwatch.service.core.db import migrate, session_scope
from roofwatch.service.core.models import Change, Commit, Device, Repository, Run, TestOutcome
from roofwatch.service.flows.detection import analyze_run
from roofwatch.service.records.changes import shown

X = "checks.test_kernel::test_x"
SHAS = [f"{i:040x}" for i in range(1, 6)]


@pytest.fixture
def history(roofwatch_env: Path) -> None:
    migrate()
    with session_scope() as session:
        session.add_all([Repository(full_name="acme/kernels", clone_url="/nowhere"),
                         Device(fingerprint="cpu-0", device_class="CPU test")])
        session.flush()
        for position, sha in enumerate(SHAS, start=1):
            session.add(Commit(repository_id=1, sha=sha, position=position))


def _measure(position: int, failing: dict[str, bool]) -> int:
    """A finished run of commit ``position`` with these tests' outcomes, analysed; its id."""
    with session_scope() as session:
        commit = session.exec(select(Commit).where(Commit.position == position)).one()
        run = Run(repository_id=1, commit_id=commit.id, trigger="manual", device_id=1,  # type: ignore[arg-type]
                  state="failed" if any(failing.values()) else "succeeded", idempotency_key=f"run-{position}")
        session.add(run)
        session.flush()
        for test_id, fails in failing.items():
            session.add(TestOutcome(run_id=run.id, suite="correctness", test_id=test_id,  # type: ignore[arg-type]
                                    outcome="failed" if fails else "passed",
                                    message=f"AssertionError: {test_id} is off" if fails else ""))
        session.flush()
        analyze_run(session, run.id, lambda good, bad: [])  # type: ignore[arg-type]
        return run.id  # type: ignore[return-value]


def _shown(session: Session) -> list[tuple[str | None, list[str], int | None, str]]:
    changes = session.exec(select(Change).where(Change.kind == "correctness-failure", shown())
                           .order_by(col(Change.id))).all()
    return [(c.test_id, list(c.details.get("tests", [])), c.range_end_position, c.state) for c in changes]


def _outcomes(broken: set[str], plain_fails: bool = False) -> dict[str, bool]:
    return {f"{X}[{p}]": p in broken for p in "abc"} | {"checks.test_kernel::test_plain": plain_fails}


def test_parametrizations_one_commit_broke_are_one_change_until_all_pass(history: None) -> None:
    _measure(1, _outcomes(set()))
    _measure(2, _outcomes({"a", "b", "c"}))
    _measure(3, _outcomes({"b"}))  # a and c mended, b not yet: still open
    with session_scope() as session:
        assert _shown(session) == [(X, [f"{X}[a]", f"{X}[b]", f"{X}[c]"], 2, "new")]
        change = session.exec(select(Change)).one()
        assert change.details["message"] == f"AssertionError: {X}[a] is off"  # the first one's, in the run's order
    _measure(4, _outcomes(set()))
    with session_scope() as session:
        assert _shown(session) == [(X, [f"{X}[a]", f"{X}[b]", f"{X}[c]"], 2, "fixed")]
        assert session.exec(select(Change)).one().details["fixed_at"] == SHAS[3]


def test_a_parametrization_broken_by_a_later_commit_is_its_own_change(history: None) -> None:
    _measure(1, _outcomes(set()))
    _measure(2, _outcomes({"a", "b"}))
    _measure(3, _outcomes({"a", "b", "c"}, plain_fails=True))
    with session_scope() as session:
        assert _shown(session) == [
            (X, [f"{X}[a]", f"{X}[b]"], 2, "new"),
            ("checks.test_kernel::test_plain", ["checks.test_kernel::test_plain"], 3, "new"),
            (X, [f"{X}[c]"], 3, "new"),
        ]


def test_changes_recorded_per_parametrization_are_folded_into_one(history: None) -> None:
    """A database from before grouping: one change per failing parametrization of the same stretch."""
    _measure(1, _outcomes(set()))
    with session_scope() as session:
        for p in "abc":
            session.add(Change(repository_id=1, device_id=1, kind="correctness-failure", phase="confirmed",
                               suite="correctness", test_id=f"{X}[{p}]", first_bad_commit_id=2,
                               range_start_sha=SHAS[0], range_end_sha=SHAS[1], range_start_position=1,
                               range_end_position=2, state="acknowledged" if p == "a" else "new",
                               details={"message": f"AssertionError: {X}[{p}] is off"}))
    _measure(2, _outcomes({"a", "b", "c"}))
    with session_scope() as session:
        # The oldest is kept (with its triage), named by its function and listing all three; the others are folded.
        assert _shown(session) == [(X, [f"{X}[a]", f"{X}[b]", f"{X}[c]"], 2, "acknowledged")]
        folded = session.exec(select(Change).where(col(Change.phase) == "rejected").order_by(col(Change.id))).all()
        assert [(c.test_id, c.details["folded_into"]) for c in folded] == [(f"{X}[b]", 1), (f"{X}[c]", 1)]
    _measure(3, _outcomes({"a", "b", "c"}))  # analysed again: nothing new, nothing doubled
    with session_scope() as session:
        assert len(session.exec(select(Change)).all()) == 3 and len(_shown(session)) == 1
