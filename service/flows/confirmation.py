"""Confirm a narrowed candidate by an interleaved A/B of exactly its two adjacent commits.

Separate runs of one commit vary between processes by more than many real regressions, so a
performance change is shown only once an A/B of the last good and the first bad commit —
interleaved in fresh processes on one device — finds it significant, beyond its threshold, in
the candidate's direction. Because the two commits are adjacent, no other step can leak in.

- Only what was asked is decided: each candidate at the pair is confirmed or rejected on its
  own benchmark's result. Anything else the A/B finds significant becomes that benchmark's own
  candidate, confirmed only if its own runs moved the same way (two independent sightings).
- An A/B in which almost every benchmark moved by one common factor measured the machine, not
  the code (``analysis.environment``): it is counted on the device and measured again. A shift
  that repeats with the same factor is the code after all.
- A change point (or a bisection's step, read from single runs too) the A/B of its pair shows
  nothing at (no change, or nothing settled by its last A/B) may have been named a commit or two off: it is sought among its neighbours (``analysis.neighbours``), by an A/B across them and then
  halves of it, and confirmed only on two adjacent commits again. Meanwhile its range is the
  stretch still in play, so a later sighting anywhere in it is the same change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlmodel import Session, col, select

from roofwatch.common.vocabulary import OPEN_STATES, UNDECIDED_STATES, ChangeKind, TriageState
from roofwatch.service.analysis import environment, lifecycle, neighbours
from roofwatch.service.core.comparison_details import add_details, details_of
from roofwatch.service.core.keys import comparison_key, comparison_key_prefix, starts_with
from roofwatch.service.core.models import Benchmark, Change, Commit, Comparison, ComparisonResult, Device, Repository
from roofwatch.service.flows import compiled_changes
from roofwatch.service.records import changes
from roofwatch.service.records.comparisons import results_of
from roofwatch.service.records.runs import find_commit
from roofwatch.service.records.series import benchmark_points

PURPOSE = "confirm"
MAX_ATTEMPTS = 3  # A/Bs of one pair before an unsettled machine leaves its candidates rejected
MAX_REUSED_STEPS = 8  # A/Bs already measured that one search among a change's neighbours may read in one go
RETURN_TOLERANCE = 0.02  # a series within 2 % (or the A/B threshold) of its old level has returned
SAME_FACTOR = 0.25  # two shifts within this (on a log scale) of each other are one and the same


@dataclass(frozen=True)
class Confirm:
    """A/B the last good and the first bad commit of narrowed candidates, on their device."""

    repository_id: int
    device_id: int
    good_sha: str
    bad_sha: str
    attempt: int = 0


def _attempts(session: Session, repository: Repository, device: Device, good: str, bad: str) -> list[Comparison]:
    prefix = comparison_key_prefix(repository, good, bad, device.fingerprint, PURPOSE)
    rows = session.exec(select(Comparison).where(starts_with(Comparison.idempotency_key, prefix))).all()
    return sorted(rows, key=lambda c: int(c.idempotency_key.rsplit(":", 1)[1]))


def _measure_again(comparison: Comparison) -> bool:
    """The A/B told nothing about (some of) the code: the machine moved, it errored, or a waiting
    candidate's benchmark came out inconclusive (too few rounds measured it, or no verdict either way)."""
    return (bool(details_of(comparison).get("environment_shift")) or bool(details_of(comparison).get("inconclusive"))
            or comparison.state in UNDECIDED_STATES)


def key_for(repository: Repository, device: Device, request: Confirm) -> str:
    return comparison_key(repository, request.good_sha, request.bad_sha, device.fingerprint, PURPOSE, request.attempt)


def candidate_keys(session: Session, request: Confirm) -> tuple[str, ...]:
    """The benchmarks (``suite::name``) whose candidates wait on this pair: all the A/B measures.

    Empty when only test outcomes wait (those are compared in round one, whatever is measured).
    """
    ids = {c.benchmark_id for c in _waiting(session, request.repository_id, request.device_id, request.good_sha,
                                            request.bad_sha) if c.benchmark_id is not None}
    rows = session.exec(select(Benchmark.suite, Benchmark.name).where(col(Benchmark.id).in_(ids))).all() if ids else []
    return tuple(sorted({f"{suite}::{name}" for suite, name in rows}))


def around(session: Session, request: Confirm) -> tuple[str, str] | None:
    """Where the candidates this A/B seeks were named, when it is a search among their neighbours (else None)."""
    for change in _waiting(session, request.repository_id, request.device_id, request.good_sha, request.bad_sha):
        named = change.details.get("named")
        if _search_of(change) is not None and named:
            return named[0], named[1]
    return None


def pair_of(change: Change) -> tuple[str | None, str | None]:
    """The two commits whose A/B decides ``change`` next: its range's ends, or where its search among its
    neighbours stands (its range is then all the commits still in play)."""
    search = _search_of(change)
    return search.to_measure() if search is not None else (change.range_start_sha, change.range_end_sha)


def _search_of(change: Change) -> neighbours.Search | None:
    found = change.details.get("neighbours")
    return neighbours.Search.from_details(found) if found else None


def _waiting(session: Session, repository_id: int, device_id: int | None, good: str, bad: str) -> list[Change]:
    """The undecided candidates whose next A/B is of ``good`` and ``bad`` on this device."""
    rows = session.exec(select(Change).where(
        Change.repository_id == repository_id, Change.phase == lifecycle.CONFIRMING,
        Change.device_id == device_id).order_by(col(Change.id))).all()
    return [change for change in rows if pair_of(change) == (good, bad)]


def pending(session: Session, repository_id: int) -> list[Confirm]:
    """The A/Bs to start now: one per (device, pair) whose candidates wait and nothing is measuring."""
    repository = session.get(Repository, repository_id)
    assert repository is not None
    requests: dict[tuple[int, str, str], Confirm] = {}
    queue = [(change, 0) for change in session.exec(select(Change).where(
        Change.repository_id == repository_id, Change.phase == lifecycle.CONFIRMING).order_by(col(Change.id))).all()]
    while queue:
        change, reused = queue.pop(0)
        device = session.get(Device, change.device_id)
        good, bad = pair_of(change)
        if device is None or device.id is None or good is None or bad is None:
            continue
        pair = (device.id, good, bad)
        if pair in requests:
            continue
        attempts = _attempts(session, repository, device, good, bad)
        latest = attempts[-1] if attempts else None
        if latest is None:
            requests[pair] = Confirm(repository_id, device.id, good, bad)
        elif latest.finished_at is None:
            continue  # being measured
        elif (_measure_again(latest) or not _measured(session, latest, change)) and len(attempts) < MAX_ATTEMPTS:
            # Again: the A/B could not settle, or it measured other benchmarks than this candidate's (a later run
            # raised this step after it) — a candidate is never rejected on an A/B that did not look at it.
            requests[pair] = Confirm(repository_id, device.id, good, bad, attempt=len(attempts))
        else:
            # Decided before this candidate appeared (an A/B asked for by another benchmark); a search among its
            # neighbours may have moved it to another pair, which may be measured already too
            _decide(session, latest, [change], final=True)
            if change.phase == lifecycle.CONFIRMING and reused + 1 < MAX_REUSED_STEPS:
                queue.append((change, reused + 1))
    return list(requests.values())


def _measured(session: Session, comparison: Comparison, change: Change) -> bool:
    """Did ``comparison`` measure ``change``'s benchmark? (A change without one, a test's, is decided by any.)"""
    if change.benchmark_id is None:
        return True
    return session.exec(select(ComparisonResult.id).where(ComparisonResult.comparison_id == comparison.id,
                                                          ComparisonResult.benchmark_id == change.benchmark_id)
                        ).first() is not None


def apply(session: Session, comparison_id: int) -> list[int]:
    """Decide every candidate at the A/B's pair; the ids of changes confirmed."""
    comparison = session.get(Comparison, comparison_id)
    if comparison is None or comparison.purpose != PURPOSE or comparison.finished_at is None:
        return []
    if details_of(comparison).get("applied"):
        return []
    if comparison.state in UNDECIDED_STATES:
        return []  # measured again (``pending``) up to MAX_ATTEMPTS; the candidates wait
    repository = session.get(Repository, comparison.repository_id)
    device = session.get(Device, comparison.device_id)
    good = session.get(Commit, comparison.base_commit_id)
    bad = session.get(Commit, comparison.head_commit_id)
    assert repository is not None and good is not None and bad is not None
    waiting = _waiting(session, comparison.repository_id, comparison.device_id, good.sha, bad.sha)
    attempts = _attempts(session, repository, device, good.sha, bad.sha) if device is not None else []
    results = results_of(session, comparison_id)
    if device is not None and _environment_shift(session, comparison, device, results, attempts, waiting):
        return []
    final = device is None or len(attempts) >= MAX_ATTEMPTS
    confirmed = _decide(session, comparison, waiting, final=final)
    if good.position is not None and bad.position == good.position + 1:
        # a search's A/B across a change point's neighbours spans several commits: nothing it saw names one of them
        confirmed += _spillover(session, comparison, good, bad, results)
    add_details(comparison, applied=True, changes=confirmed)
    session.add(comparison)
    return confirmed


def _environment_shift(session: Session, comparison: Comparison, device: Device,
                       results: list[tuple[ComparisonResult, Benchmark]], attempts: list[Comparison],
                       waiting: list[Change]) -> bool:
    """Was this A/B moved by the machine? Then count it and leave the pair to be measured again.

    ``attempts`` are every A/B of this pair (this one included), ``waiting`` its undecided candidates.
    """
    ratios = [math.log(r.head_median / r.base_median) for r, _ in results if r.head_median and r.base_median]
    # An interaction moved by the numbers too: a machine that shifts every benchmark shifts identical code most.
    significant = [r.direction in ("regression", "improvement", "interaction")
                   for r, _ in results if r.head_median and r.base_median]
    factor = environment.common_shift(ratios, significant)
    if factor is None:
        return False
    earlier = [c for c in attempts if c.id != comparison.id]
    previous = details_of(earlier[-1]).get("environment_shift") if earlier else None
    if previous and abs(math.log(factor) - math.log(previous)) <= SAME_FACTOR * abs(math.log(previous)):
        return False  # the same shift twice in fresh processes: the code did it
    device.environment_shifts += 1
    add_details(comparison, environment_shift=factor)
    session.add_all([device, comparison])
    if len(earlier) + 1 >= MAX_ATTEMPTS:
        for change in waiting:
            change.phase = lifecycle.REJECTED
            change.details = {**change.details, "rejected": "the machine moved every benchmark in every A/B"}
            session.add(change)
        add_details(comparison, applied=True, changes=[])
    return True


def _decide(session: Session, comparison: Comparison, waiting: list[Change], *, final: bool) -> list[int]:
    """Confirm or reject each waiting candidate on its own benchmark's result.

    An inconclusive result rejects nothing unless this was the last A/B allowed: the pair is
    measured again (``pending``), since errored rounds or an unsettled machine are no evidence
    that the step is not there. A change point whose pair shows no change is sought among its
    neighbours before it is rejected (``_seek``).
    """
    by_benchmark = {r.benchmark_id: r for r, _ in results_of(session, comparison.id)}  # type: ignore[arg-type]
    confirmed: list[int] = []
    for change in waiting:
        result = by_benchmark.get(change.benchmark_id)  # type: ignore[arg-type]
        expected = "regression" if change.kind == ChangeKind.PERF_REGRESSION else "improvement"
        if result is not None and result.direction == "inconclusive" and not final:
            add_details(comparison, inconclusive=True)
            session.add(comparison)
            continue
        moved = result is not None and result.direction == expected
        if result is not None and _seek(session, change, comparison, result, moved):
            continue
        if not moved:
            change.phase = lifecycle.REJECTED
            change.details = {**change.details, "comparison_id": comparison.id,
                              "rejected": _rejection(change, comparison, result)}
            session.add(change)
            continue
        assert result is not None
        if _confirm(session, change, comparison, result):
            confirmed.append(change.id)  # type: ignore[arg-type]
    return confirmed


def _rejection(change: Change, comparison: Comparison, result: ComparisonResult | None) -> str:
    if result is None:
        return f"the A/B {comparison.state}: {comparison.error}" if comparison.error else "not measured by the A/B"
    named = change.details.get("named")
    if named:
        return f"{result.reason}: not found among the commits around {named[1][:12]}, where it was named, either"
    return result.reason


def _seek(session: Session, change: Change, comparison: Comparison, result: ComparisonResult, moved: bool) -> bool:
    """Carry a search among a change point's neighbours one A/B on: True when that settles what this A/B does with
    the change (it waits on its next pair, or the step it found is another change's), False when the A/B decides
    it as any candidate's (it moved on two adjacent commits, or not at all).

    A search starts where the pair of a candidate read from single runs (``details["placed"]``: a change point, or
    a bisection's step) did not show its step: no change, or still nothing settled after the pair's last A/B (two
    commits of the same code may come out inconclusive on a busy machine, as they do no change on a quiet one). A
    move the other way, or an A/B that measured nothing of it, rejects it as before.
    """
    search = _search_of(change)
    if search is None:
        # an inconclusive result reaches here only from the last A/B allowed (``_decide``)
        if moved or result.direction not in ("none", "inconclusive") or not change.details.get("placed"):
            return False
        search = _span(session, change)
        if search is None:
            return False
        change.details = {**change.details, "named": [change.range_start_sha, change.range_end_sha],
                          "named_comparison_id": comparison.id}
    else:
        step = search.after(moved)
        if not isinstance(step, neighbours.Search):
            if step == "rejected":
                return False
            # found on two adjacent commits: the range is that pair, as any confirmed change's — unless the step
            # there is another change of the series already (the span held it), which this one never was
            _set_range(session, change, *search.to_measure())
            change.details = {k: v for k, v in change.details.items() if k != "neighbours"}
            other = changes.find_same(
                session, repository_id=change.repository_id, kind=change.kind, device_id=change.device_id,
                benchmark_id=change.benchmark_id, test_id=change.test_id, start=change.range_start_position,
                end=change.range_end_position, besides=change.id, rejected=False)  # type: ignore[arg-type]
            if other is not None:
                change.phase = lifecycle.REJECTED
                change.details = {**change.details, "comparison_id": comparison.id,
                                  "rejected": f"the step among its neighbours is change {other.id}"}
                session.add(change)
                return True
            return False
        search = step
    change.details = {**change.details, "neighbours": search.as_details()}
    _set_range(session, change, search.commits[search.lo], search.commits[search.hi])
    change.first_bad_commit_id = None
    session.add(change)
    return True


def _span(session: Session, change: Change) -> neighbours.Search | None:
    """The search around ``change``'s named pair, among the consecutive commits of its series measured either side
    with the suite's files the pair ran (None: no neighbour measured, or a named pair that is no two adjacent
    commits). A commit where a suite kept outside the repository changed its files is a step of the benchmark,
    not of the code (``analysis.suite_files``): the span stops short of it."""
    start, end = change.range_start_position, change.range_end_position
    if change.benchmark_id is None or change.device_id is None or start is None or end != start + 1:
        return None
    benchmark = session.get(Benchmark, change.benchmark_id)
    points = benchmark_points(session, change.benchmark_id, change.device_id,
                              suite=benchmark.suite if benchmark is not None else None)
    files = {p.position: p.files for p in points}
    if start not in files or end not in files or files[start] != files[end]:
        return None
    at = {p.position: p.sha for p in points if p.files == files[start]}
    low, high = start, end
    while low - 1 in at and start - low < neighbours.SPAN:
        low -= 1
    while high + 1 in at and high - end < neighbours.SPAN:
        high += 1
    return neighbours.Search.around([at[p] for p in range(low, high + 1)], at[start], at[end])


def _set_range(session: Session, change: Change, good_sha: str, bad_sha: str) -> None:
    good = find_commit(session, change.repository_id, good_sha)
    bad = find_commit(session, change.repository_id, bad_sha)
    assert good is not None and bad is not None  # every commit of a search is a measured point of the series
    change.range_start_sha, change.range_start_position = good.sha, good.position
    change.range_end_sha, change.range_end_position = bad.sha, bad.position


def _confirm(session: Session, change: Change, comparison: Comparison, result: ComparisonResult) -> bool:
    """Confirm ``change`` with the A/B's numbers, unless its kernels' binaries say it is the machine."""
    good = session.get(Commit, comparison.base_commit_id)
    bad = session.get(Commit, comparison.head_commit_id)
    benchmark = session.get(Benchmark, change.benchmark_id) if change.benchmark_id is not None else None
    assert good is not None and bad is not None
    decision, compiled = compiled_changes.timing_decision(
        session, comparison.repository_id, good.sha, bad.sha, benchmark.name if benchmark else "",
        result.change_pct, result.threshold_pct)
    if not decision.report:
        change.phase = lifecycle.REJECTED
        change.details = {**change.details, **compiled, "comparison_id": comparison.id, "held_back": True,
                          "rejected": decision.note}
        session.add(change)
        return False
    change.phase = lifecycle.CONFIRMED
    change.first_bad_commit_id = comparison.head_commit_id
    change.change_pct, change.ci_low, change.ci_high = result.change_pct, result.ci_low, result.ci_high
    change.p_value = result.q_value
    details = details_of(comparison)
    moved = details.get("environment_changes", {}).get(benchmark.suite if benchmark else "", [])
    key = f"{benchmark.suite}::{benchmark.name}" if benchmark else ""
    level = (details.get("adjusted_confidence") or {}).get(key, details.get("confidence"))
    change.details = {**change.details, "before": result.base_median, "after": result.head_median,
                      **({"confidence": level} if level is not None else {}),  # of ci_low..ci_high
                      "comparison_id": comparison.id, "threshold_pct": result.threshold_pct,
                      "mde_pct": result.mde_pct, "noise_pct": result.noise_pct, "rounds": len(result.base_values),
                      **compiled, **({"environment_change": moved} if moved else {}),
                      **_attributed(result)}
    session.add(change)
    session.flush()
    if change.kind == ChangeKind.PERF_IMPROVEMENT:
        _mark_returned(session, change, result.threshold_pct)
    return True


def _attributed(result: ComparisonResult) -> dict[str, object]:
    """The confirming A/B's word on why the benchmark moved (``analysis.causes``), for the change's details."""
    found = result.attribution or {}
    if not found.get("why"):
        return {}
    return {"why": found["why"], "attribution": {k: v for k, v in found.items() if k != "why"}}


def _spillover(session: Session, comparison: Comparison, good: Commit, bad: Commit,
               results: list[tuple[ComparisonResult, Benchmark]]) -> list[int]:
    """Significant results nobody asked about: each its own candidate, confirmed by its own runs."""
    confirmed: list[int] = []
    for result, benchmark in results:
        if result.direction not in ("regression", "improvement"):
            continue
        kind = ChangeKind.PERF_REGRESSION if result.direction == "regression" else ChangeKind.PERF_IMPROVEMENT
        if changes.find_same(session, repository_id=comparison.repository_id, kind=kind,
                             device_id=comparison.device_id, benchmark_id=benchmark.id,
                             start=good.position, end=bad.position):  # type: ignore[arg-type]
            continue
        change = changes.record(
            session, repository_id=comparison.repository_id, device_id=comparison.device_id, kind=kind,
            phase=lifecycle.CANDIDATE, good=good, bad=bad, run_id=None, benchmark_id=benchmark.id,
            suite=benchmark.suite, details={"seen_in_comparison": comparison.id})
        if _own_runs_agree(session, benchmark, comparison.device_id, good, bad, result):  # type: ignore[arg-type]
            if _confirm(session, change, comparison, result):
                confirmed.append(change.id)  # type: ignore[arg-type]
        else:
            change.phase = lifecycle.REJECTED
            change.details = {**change.details, "rejected": "its own runs of these commits did not move"}
            session.add(change)
    return confirmed


def _own_runs_agree(session: Session, benchmark: Benchmark, device_id: int, good: Commit, bad: Commit,
                    result: ComparisonResult) -> bool:
    """Did the benchmark's separate runs of the two commits move as the A/B says, beyond its threshold?"""
    points = {p.position: p.median for p in benchmark_points(session, benchmark.id, device_id)}  # type: ignore[arg-type]
    before, after = points.get(good.position), points.get(bad.position)  # type: ignore[arg-type]
    if not before or not after or not result.base_median or not result.head_median:
        return False
    seen, measured = math.log(after / before), math.log(result.head_median / result.base_median)
    return seen * measured > 0 and abs(seen) > math.log1p((result.threshold_pct or 0.0) / 100)


def _mark_returned(session: Session, improvement: Change, threshold_pct: float | None) -> None:
    """An open regression of this series whose old level is back is fixed."""
    tolerance = max(RETURN_TOLERANCE, (threshold_pct or 0.0) / 100.0)
    level = improvement.details.get("after")
    if not level:
        return
    for regression in session.exec(select(Change).where(
            Change.benchmark_id == improvement.benchmark_id, Change.kind == ChangeKind.PERF_REGRESSION,
            Change.phase == lifecycle.CONFIRMED, col(Change.state).in_(OPEN_STATES))).all():
        before = regression.details.get("before")
        if before and level <= before * (1 + tolerance):
            regression.state = TriageState.FIXED
            regression.details = {**regression.details, "fixed_by_change": improvement.id}
            session.add(regression)
