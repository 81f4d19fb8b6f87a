"""Narrow an open change's range to its first bad commit, one measured midpoint at a time.

A change found between two measured commits with unmeasured ones in between carries
``details["bisect_range"]``: the candidate first-bad commits still in play, oldest first,
the last one (``range_end_sha``) excluded because it is known bad. Each run of a commit in
that list decides which half the culprit is in — by the test's outcome for a correctness
failure (any of its parametrizations failing: a group is bisected once), by whether the median sits nearer the level after the change than before it for a
performance change — exactly like ``git bisect good|bad``. A commit whose run errored is
skipped, like ``git bisect skip``.

One process's timing can be far off on a busy host, and a wrong step sends the search down
the wrong half for good. So a performance verdict must be clear: a level in the middle third
between before and after (on a log scale) is measured again, in a fresh run, and the commit
is judged on the median of its runs, up to ``MAX_RUNS_PER_COMMIT``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Literal

from sqlmodel import Session, col, select

from roofwatch.common.vocabulary import NARROWED_STATES, PERFORMANCE_KINDS, TERMINAL_STATES, ChangeKind
from roofwatch.service.analysis import lifecycle
from roofwatch.service.analysis.correctness import FAILING
from roofwatch.service.core.keys import bisect_key_prefix, starts_with
from roofwatch.service.core.models import Change, Commit, Device, Measurement, Repository, Run, TestOutcome
from roofwatch.service.records.changes import members
from roofwatch.service.records.runs import find_commit

# A level this far (or less) from the midpoint between before and after, as a fraction of the
# change, decides nothing on its own: one run more is measured.
UNCLEAR_BAND = 1 / 6
MAX_RUNS_PER_COMMIT = 3

Verdict = bool | None | Literal["unclear"]


@dataclass(frozen=True)
class Bisect:
    """Measure one commit inside a range whose first bad commit is not known yet."""

    repository_id: int
    device_id: int
    sha: str
    attempt: int = 0  # a commit whose first run left the verdict unclear is measured again


def _ranged(session: Session, repository_id: int) -> list[Change]:
    rows = session.exec(select(Change).where(
        Change.repository_id == repository_id, col(Change.state).in_(NARROWED_STATES),
        col(Change.first_bad_commit_id).is_(None), Change.phase != lifecycle.REJECTED,
    )).all()
    return [c for c in rows if c.details.get("bisect_range")]


def _nearer_after(value: float, before: float, after: float, decided: bool) -> Verdict:
    """Is ``value`` on the after side of the change? "unclear" near the middle unless ``decided``."""
    position = math.log(max(value, 1e-300) / before) / math.log(after / before)
    if not decided and abs(position - 0.5) <= UNCLEAR_BAND:
        return "unclear"
    return position > 0.5


def _verdict(session: Session, change: Change, runs: list[Run]) -> Verdict:
    """Do ``runs`` (of one commit) show the change? ``None`` when they cannot tell."""
    before, after = change.details.get("before"), change.details.get("after")
    decided = len(runs) >= MAX_RUNS_PER_COMMIT
    run_ids = [run.id for run in runs]
    if change.kind == ChangeKind.CORRECTNESS_FAILURE:
        # Bad when any of its parametrizations fails there (in the latest run that ran them): the
        # group is bisected once, and one that broke later is split off by the next analysis.
        rows = session.exec(select(TestOutcome.run_id, TestOutcome.outcome).where(
            col(TestOutcome.run_id).in_(run_ids), TestOutcome.suite == change.suite,
            col(TestOutcome.test_id).in_(members(change)))).all()
        if not rows:
            return None
        latest = max(run_id for run_id, _ in rows)
        return any(outcome in FAILING for run_id, outcome in rows if run_id == latest)
    if change.kind == ChangeKind.NUMERICS_DRIFT:
        outcome = session.exec(select(TestOutcome).where(
            col(TestOutcome.run_id).in_(run_ids), TestOutcome.suite == change.suite,
            TestOutcome.test_id == change.test_id,
        ).order_by(col(TestOutcome.run_id).desc())).first()
        if outcome is None:
            return None
        value = getattr(outcome, change.details.get("metric", "max_abs_err"))
        if value is None or not before or not after or before == after:
            return None
        return _nearer_after(value, before, after, decided=True)
    medians = [m.median for m in session.exec(select(Measurement).where(
        col(Measurement.run_id).in_(run_ids), Measurement.benchmark_id == change.benchmark_id)).all()
        if m.median > 0]
    if not medians or not before or not after or before == after:
        return None
    return _nearer_after(statistics.median(medians), before, after, decided)


def _narrow_one(session: Session, change: Change, runs: list[Run], sha: str, skip: bool = False) -> bool:
    """Apply the verdict of ``runs`` of ``sha``; False when it is unclear and another run is needed."""
    remaining: list[str] = list(change.details["bisect_range"])
    verdict = None if skip else _verdict(session, change, runs)
    if verdict == "unclear":
        return False
    position = remaining.index(sha)
    log = list(change.details.get("bisect_log", []))
    entry = {"sha": sha, "run": runs[0].id if runs else None, "runs": [run.id for run in runs]}
    commit = find_commit(session, change.repository_id, sha)
    if verdict is None:
        remaining.pop(position)
        log.append({**entry, "verdict": "skip"})
    elif verdict:
        change.range_end_sha, remaining = sha, remaining[:position]
        change.range_end_position = commit.position if commit else change.range_end_position
        log.append({**entry, "verdict": "bad"})
    else:
        change.range_start_sha, remaining = sha, remaining[position + 1:]
        change.range_start_position = commit.position if commit else change.range_start_position
        log.append({**entry, "verdict": "good"})
    change.details = {**change.details, "bisect_range": remaining, "bisect_log": log}
    # With a commit skipped, the culprit may be that commit: the range stays a range, as in git bisect.
    if not remaining and not any(entry["verdict"] == "skip" for entry in log):
        first_bad = find_commit(session, change.repository_id, change.range_end_sha) if change.range_end_sha else None
        change.first_bad_commit_id = first_bad.id if first_bad else None
        if change.kind in PERFORMANCE_KINDS:
            # named from single runs, one of which a busy host may have moved: a confirmation that shows nothing at
            # the pair looks at its neighbours (``confirmation``), as it does for a change point's
            change.details = {**change.details, "placed": True}
        if change.phase == lifecycle.NARROWING:
            change.phase = lifecycle.phase_after_narrowing(change.kind)
    session.add(change)
    session.flush()
    return True


def narrow(session: Session, run: Run, commit: Commit) -> None:
    """Let ``run`` (of ``commit``) split every open range it lies in."""
    for change in _ranged(session, run.repository_id):
        device_id = change.details.get("device_id")
        if commit.sha in change.details["bisect_range"] and device_id in (None, run.device_id):
            runs = _finished_runs(session, run.repository_id, commit.sha, run.device_id) or [run]
            _narrow_one(session, change, runs, commit.sha)


def _finished_runs(session: Session, repository_id: int, sha: str, device_id: int | None) -> list[Run]:
    """Every finished run of ``sha`` on the device, newest first."""
    return list(session.exec(
        select(Run).join(Commit, col(Run.commit_id) == col(Commit.id))
        .where(Commit.repository_id == repository_id, Commit.sha == sha, Run.device_id == device_id,
               col(Run.state).in_(TERMINAL_STATES))
        .order_by(col(Run.id).desc())
    ).all())


def _bisect_attempts(session: Session, repository: Repository, sha: str, device: Device) -> list[Run]:
    # autoescape: a "_" in a repository name is a literal, not LIKE's one-character wildcard.
    prefix = bisect_key_prefix(repository, sha, device.fingerprint)
    return list(session.exec(select(Run).where(starts_with(Run.idempotency_key, prefix))).all())


def next_steps(session: Session, repository_id: int) -> list[Bisect]:
    """The midpoint to measure for every range still open.

    A midpoint some earlier run already measured on the device decides at once, unless its
    level is unclear (then one more run is asked for); one whose run errored is skipped.
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
            done = _finished_runs(session, repository_id, midpoint, device.id)
            if done and _narrow_one(session, change, done, midpoint):
                continue
            attempts = _bisect_attempts(session, repository, midpoint, device)
            if any(run.state not in TERMINAL_STATES for run in attempts):
                break  # being measured
            if len(attempts) >= MAX_RUNS_PER_COMMIT:
                # Every attempt ended before measuring anything on the device: git bisect skip.
                _narrow_one(session, change, attempts, midpoint, skip=True)
                continue
            steps.append(Bisect(repository_id, device.id, midpoint, len(attempts)))  # type: ignore[arg-type]
            break
    return steps
