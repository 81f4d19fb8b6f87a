"""An A/B under way: after each round, what is still open and about how long it will take.

The worker says when it starts (``roofwatch.comparison_started``: the comparison is ``running``
from round one on, not ``queued``) and sends the rest after each round
(``roofwatch.comparison_progress``); the comparison's row says it (``state``, ``rounds``,
``details.progress``, read by the API and the compare page) and a pull request's check says it
while it runs: "running: round 3 of at most 10, 2 benchmarks open, about 40 s left". A notice that
arrives after the verdict changes nothing.
"""

from __future__ import annotations

from sqlalchemy import update
from sqlmodel import Session, col

from roofwatch.common.vocabulary import RunState, Trigger
from roofwatch.service.core.comparison_details import add_details, details_of
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.links import compare_url
from roofwatch.service.core.models import Commit, Comparison, Repository, Run, utcnow
from roofwatch.service.core.units import seconds
from roofwatch.service.github import reporting

OPEN_SHOWN = 50  # open benchmarks named in the row; the count is always whole


def started(comparison_id: int) -> None:
    """A worker began the comparison: running, no round done yet."""
    with session_scope() as session:
        comparison = session.get(Comparison, comparison_id)
        if comparison is None or comparison.finished_at is not None or comparison.state != RunState.QUEUED:
            return  # finished, cancelled, or a later notice came first
        comparison.state = RunState.RUNNING
        add_details(comparison, progress={"round": 0, "updated_at": utcnow().isoformat(timespec="seconds")})
        session.add(comparison)


def record(comparison_id: int, rounds_done: int, open_keys: list[str], round_s: float, eta_s: float) -> None:
    report_ids: list[int] = []
    with session_scope() as session:
        # Claimed by one conditional UPDATE, not read then written: a notice read just before the verdict
        # committed would otherwise write "running" over it, and the check would end pending. The UPDATE
        # waits for (PostgreSQL) or holds off (SQLite's single writer) the verdict's transaction.
        claimed = session.connection().execute(update(Comparison).where(
            col(Comparison.id) == comparison_id, col(Comparison.finished_at).is_(None),
            col(Comparison.state) != RunState.CANCELLED).values(state=RunState.RUNNING, rounds=rounds_done))
        comparison = session.get(Comparison, comparison_id) if claimed.rowcount else None
        if comparison is None:
            return
        add_details(comparison, progress={
            "round": rounds_done, "open_count": len(open_keys), "open": sorted(open_keys)[:OPEN_SHOWN],
            "round_s": round_s, "eta_s": eta_s, "updated_at": utcnow().isoformat(timespec="seconds")})
        session.add(comparison)
        report_ids = _show_on_pull_request(session, comparison, rounds_done, len(open_keys), eta_s)
    reporting.send(report_ids)


def describe(rounds_done: int, max_rounds: int | None, open_count: int, eta_s: float) -> str:
    """One line a person reads while it runs."""
    cap = f" of at most {max_rounds}" if max_rounds else ""
    if not open_count:
        return f"running: round {rounds_done}{cap} done, every benchmark decided"
    noun = "benchmark" if open_count == 1 else "benchmarks"
    return f"running: round {rounds_done}{cap} done, {open_count} {noun} open, about {seconds(eta_s)} left"


def _show_on_pull_request(session: Session, comparison: Comparison, rounds_done: int, open_count: int,
                          eta_s: float) -> list[int]:
    run = session.get(Run, comparison.run_id) if comparison.run_id is not None else None
    if run is None or run.trigger != Trigger.PULL_REQUEST or run.state != RunState.RUNNING:
        return []
    repository = session.get(Repository, comparison.repository_id)
    head = session.get(Commit, comparison.head_commit_id)
    assert repository is not None and head is not None
    text = describe(rounds_done, details_of(comparison).get("max_rounds"), open_count, eta_s)
    return reporting.show_phase(session, repository, head.sha, "running", text, compare_url(comparison.id))  # type: ignore[arg-type]
