"""Narrow an open change's range to its first bad commit, one measured midpoint at a time.

A change found between two measured commits with unmeasured ones in between carries
``details["bisect_range"]``: the candidate first-bad commits still in play, oldest first,
the last one (``range_end_sha``) excluded because it is known bad. Each run of a commit in
that list decides which half the culprit is in — by the test's outcome for a correctness
failure, by whether the median sits nearer the level after the change than before it for a
performance change — exactly like ``git bisect good|bad``. A commit whose run errored is
skipped, like ``git bisect skip``.
"""

from __future__ import annotations

import math

from sqlmodel import Session, col, select

from service.analysis.correctness import FAILING
from service.followups import Bisect, bisect_key
from service.models import Change, Commit, Device, Measurement, Repository, Run, TestOutcome

# A fixed change is still narrowed: which commit introduced a bug matters after it is fixed.
BISECTED_STATES = ("new", "acknowledged", "fixed")


def _ranged(session: Session, repository_id: int) -> list[Change]:
    rows = session.exec(select(Change).where(
        Change.repository_id == repository_id, col(Change.state).in_(BISECTED_STATES),
        col(Change.first_bad_commit_id).is_(None),
    )).all()
    return [c for c in rows if c.details.get("bisect_range")]


def _is_bad(session: Session, change: Change, run: Run) -> bool | None:
    """Does ``run`` show the change? ``None`` when the run cannot tell."""
    if change.kind in ("correctness-failure", "numerics-drift"):
        outcome = session.exec(select(TestOutcome).where(
            TestOutcome.run_id == run.id, TestOutcome.suite == change.suite, TestOutcome.test_id == change.test_id,
        )).first()
        if outcome is None:
            return None
        if change.kind == "correctness-failure":
            return outcome.outcome in FAILING
        before, after = change.details.get("before"), change.details.get("after")
        value = getattr(outcome, change.details.get("metric", "max_abs_err"))
        if value is None or not before or not after:
            return None
        return abs(math.log(max(value, 1e-300) / after)) < abs(math.log(max(value, 1e-300) / before))
    measurement = session.exec(select(Measurement).where(
        Measurement.run_id == run.id, Measurement.benchmark_id == change.benchmark_id)).first()
    before, after = change.details.get("before"), change.details.get("after")
    if measurement is None or not before or not after or measurement.median <= 0:
        return None
    return abs(math.log(measurement.median / after)) < abs(math.log(measurement.median / before))


def _narrow_one(session: Session, change: Change, run: Run, sha: str) -> None:
    remaining: list[str] = list(change.details["bisect_range"])
    verdict = _is_bad(session, change, run)
    position = remaining.index(sha)
    log = list(change.details.get("bisect_log", []))
    if verdict is None:
        remaining.pop(position)
        log.append({"sha": sha, "verdict": "skip", "run": run.id})
    elif verdict:
        change.range_end_sha, remaining = sha, remaining[:position]
        log.append({"sha": sha, "verdict": "bad", "run": run.id})
    else:
        change.range_start_sha, remaining = sha, remaining[position + 1:]
        log.append({"sha": sha, "verdict": "good", "run": run.id})
    change.details = {**change.details, "bisect_range": remaining, "bisect_log": log}
    # With a commit skipped, the culprit may be that commit: the range stays a range, as in git bisect.
    if not remaining and not any(entry["verdict"] == "skip" for entry in log):
        first_bad = session.exec(select(Commit).where(
            Commit.repository_id == change.repository_id, Commit.sha == change.range_end_sha)).first()
        change.first_bad_commit_id = first_bad.id if first_bad else None
    session.add(change)
    session.flush()


def narrow(session: Session, run: Run, commit: Commit) -> None:
    """Let ``run`` (of ``commit``) split every open range it lies in."""
    for change in _ranged(session, run.repository_id):
        if commit.sha in change.details["bisect_range"] and change.details.get("device_id") in (None, run.device_id):
            _narrow_one(session, change, run, commit.sha)


def _finished_run(session: Session, repository_id: int, sha: str, device_id: int) -> Run | None:
    return session.exec(
        select(Run).join(Commit, col(Run.commit_id) == col(Commit.id))
        .where(Commit.repository_id == repository_id, Commit.sha == sha, Run.device_id == device_id,
               col(Run.state).in_(("succeeded", "failed", "errored", "cancelled", "skipped")))
        .order_by(col(Run.id).desc())
    ).first()


def next_steps(session: Session, repository_id: int) -> list[Bisect]:
    """The midpoint to measure for every range still open.

    A midpoint some earlier run already measured on the device decides at once; one whose
    run errored is skipped.
    """
    repository = session.get(Repository, repository_id)
    assert repository is not None
    steps: list[Bisect] = []
    for change in _ranged(session, repository_id):
        device = session.get(Device, change.details.get("device_id"))
        if device is None:
            continue
        while change.details.get("bisect_range") and change.first_bad_commit_id is None:
            remaining: list[str] = change.details["bisect_range"]
            midpoint = remaining[len(remaining) // 2]
            done = _finished_run(session, repository_id, midpoint, device.id)  # type: ignore[arg-type]
            if done is not None:
                _narrow_one(session, change, done, midpoint)
                continue
            pending = session.exec(select(Run).where(
                Run.idempotency_key == bisect_key(repository, midpoint, device))).first()
            if pending is None:
                steps.append(Bisect(repository_id, device.id, midpoint))  # type: ignore[arg-type]
            break
    return steps
