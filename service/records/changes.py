"""Changes in the database: find the one a sighting belongs to, record a new one, list the shown.

Identity is (repository, series, epoch, direction, location) — see roofwatch.service.analysis.lifecycle:
a sighting overlapping a known change of the same benchmark (or test), device and kind is that
change, whatever its phase or triage state, so no history is ever stored twice.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import ColumnElement
from sqlmodel import Session, col, select

from roofwatch.common.vocabulary import ChangeKind
from roofwatch.service.analysis.failure_groups import shown_name
from roofwatch.service.analysis.lifecycle import CONFIRMED, REJECTED, overlaps
from roofwatch.service.core.models import Change, Commit


def shown() -> ColumnElement[bool]:
    """Changes people see: confirmed ones. Candidates and rejected sightings stay internal."""
    return col(Change.phase) == CONFIRMED


def find_same(session: Session, *, repository_id: int, kind: str, device_id: int | None,
              benchmark_id: int | None = None, test_id: str | None = None, also_test_ids: Collection[str] = (),
              start: int | None, end: int, besides: int | None = None, rejected: bool = True) -> Change | None:
    """The known change this sighting ``(start, end]`` (positions) is, if any.

    ``also_test_ids``: other ids the same change may be stored under — a test function's
    parametrizations, each of which was a change of its own before failures were grouped.
    ``besides``: a change that is not the one sought (the sighting's own); ``rejected``: whether a
    rejected change counts (a sighting of one is that one; a search that lands on it is not).
    """
    same_test = col(Change.test_id).in_([test_id, *also_test_ids]) if also_test_ids else Change.test_id == test_id
    query = select(Change).where(
        Change.repository_id == repository_id, Change.kind == kind, Change.benchmark_id == benchmark_id, same_test)
    if besides is not None:
        query = query.where(Change.id != besides)
    if not rejected:
        query = query.where(Change.phase != REJECTED)
    if device_id is not None:
        # Correctness outcomes do not depend on the device's epoch the way timings do, but a
        # failure seen on another GPU model is still its own sighting.
        query = query.where(Change.device_id == device_id)
    for change in session.exec(query.order_by(col(Change.id))).all():
        if change.range_end_position is None:
            continue
        if overlaps(start, end, change.range_start_position, change.range_end_position):
            return change
    return None


def members(change: Change) -> list[str]:
    """The tests a correctness change is made of: its function's failing parametrizations (``tests``),
    or the one test of a change recorded before failures were grouped."""
    return list(change.details.get("tests") or ([change.test_id] if change.test_id else []))


def test_name(test_id: str | None, details: dict[str, Any] | None) -> str:
    """What a test's change is called: its one failing test, or its function when several parametrizations fail."""
    tests = list((details or {}).get("tests") or [])
    return shown_name(test_id or "", tests) if tests else (test_id or "")


def narrow_to(change: Change, good: Commit | None, bad: Commit) -> None:
    """Keep the tighter of the change's range and ``(good, bad]``: both hold the step."""
    start = good.position if good else None
    if good is not None and (change.range_start_position is None or start > change.range_start_position):  # type: ignore[operator]
        change.range_start_sha, change.range_start_position = good.sha, start
    if change.range_end_position is None or bad.position < change.range_end_position:  # type: ignore[operator]
        change.range_end_sha, change.range_end_position = bad.sha, bad.position


def record(session: Session, *, repository_id: int, device_id: int | None, kind: ChangeKind, phase: str,
           good: Commit | None, bad: Commit, run_id: int | None, **fields: Any) -> Change:
    """A new change first seen after ``good`` (last good measured commit) and at ``bad``."""
    change = Change(repository_id=repository_id, device_id=device_id, kind=kind, phase=phase,
                    detected_run_id=run_id, **fields)
    narrow_to(change, good, bad)
    session.add(change)
    session.flush()
    return change
