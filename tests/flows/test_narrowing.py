"""Narrowing (bisection) steps: a clear level decides at once, an unclear one is measured again, a dead midpoint is skipped."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import Session, select

from roofwatch.service.core.db import migrate, session_scope
from roofwatch.service.core.keys import bisect_key
from roofwatch.service.core.models import Benchmark, Change, Commit, Device, Measurement, Repository, Run
from roofwatch.service.flows import narrowing as bisect
from roofwatch.service.flows.narrowing import Bisect

SHAS = [f"{i:040x}" for i in range(1, 8)]  # good end, five unmeasured commits, bad end
BEFORE, AFTER = 1.0e-3, 3.0e-3  # a 3x slowdown


@pytest.fixture
def ranged_change(roofwatch_env: Path) -> int:
    """A candidate slowdown between SHAS[0] (good) and SHAS[6] (bad) with SHAS[1:6] unmeasured."""
    migrate()
    with session_scope() as session:
        repository = Repository(full_name="acme/kernels", clone_url="/nowhere")
        device = Device(fingerprint="cpu-0", device_class="cpu")
        session.add_all([repository, device])
        session.flush()
        for position, sha in enumerate(SHAS, start=1):
            session.add(Commit(repository_id=repository.id, sha=sha, position=position))  # type: ignore[arg-type]
        benchmark = Benchmark(fingerprint="b", repository_id=repository.id, suite="benchmarks",  # type: ignore[arg-type]
                              name="test_rmsnorm", device_class="cpu")
        session.add(benchmark)
        session.flush()
        change = Change(repository_id=repository.id, benchmark_id=benchmark.id, kind="perf-regression",  # type: ignore[arg-type]
                        phase="narrowing", device_id=device.id, range_start_sha=SHAS[0], range_end_sha=SHAS[6],
                        range_start_position=1, range_end_position=7, suite="benchmarks",
                        details={"before": BEFORE, "after": AFTER, "device_id": device.id,
                                 "bisect_range": SHAS[1:6]})
        session.add(change)
        session.flush()
        return change.id  # type: ignore[return-value]


def _measure(session: Session, sha: str, median: float | None, attempt: int = 0, state: str = "succeeded") -> Run:
    """A finished bisect run of ``sha``; ``median=None`` is one that measured nothing."""
    repository = session.get(Repository, 1)
    device = session.get(Device, 1)
    commit = session.exec(select(Commit).where(Commit.sha == sha)).one()
    assert repository is not None and device is not None
    run = Run(repository_id=1, commit_id=commit.id, trigger="bisect", state=state,  # type: ignore[arg-type]
              device_id=device.id if median is not None else None,
              idempotency_key=bisect_key(repository, sha, device.fingerprint, attempt))
    session.add(run)
    session.flush()
    if median is not None:
        session.add(Measurement(run_id=run.id, benchmark_id=1, samples=[median], median=median,  # type: ignore[arg-type]
                                iqr=0.0, min=median, mean=median, n=1, cv=0.0))
        session.flush()
    return run


def _steps() -> list[Bisect]:
    with session_scope() as session:
        return bisect.next_steps(session, 1)


def _change(change_id: int) -> Change:
    with session_scope() as session:
        change = session.get(Change, change_id)
        assert change is not None
        session.expunge(change)
        return change


def test_clear_levels_walk_the_range_to_the_first_bad_commit(ranged_change: int) -> None:
    levels = {SHAS[3]: 1.05e-3, SHAS[4]: 2.9e-3, SHAS[5]: 3.1e-3}  # culprit: SHAS[4]
    for _ in range(5):
        steps = _steps()
        if not steps:
            break
        assert len(steps) == 1 and steps[0].attempt == 0
        with session_scope() as session:
            _measure(session, steps[0].sha, levels[steps[0].sha])
    change = _change(ranged_change)
    assert [entry["verdict"] for entry in change.details["bisect_log"]] == ["good", "bad", "bad"]
    assert change.range_start_sha == SHAS[3] and change.range_end_sha == SHAS[4]
    assert (change.range_start_position, change.range_end_position) == (4, 5)
    assert change.phase == "confirming"  # narrowed: next, an A/B of exactly SHAS[3] and SHAS[4]
    with session_scope() as session:
        first_bad = session.get(Commit, change.first_bad_commit_id)
        assert first_bad is not None and first_bad.sha == SHAS[4]


def test_an_unclear_level_is_measured_again_and_judged_on_the_median_of_runs(ranged_change: int) -> None:
    # A neutral commit whose one run landed at 1.7x (half way, in log terms, to the 3x) decides nothing.
    assert [s.sha for s in _steps()] == [SHAS[3]]
    with session_scope() as session:
        _measure(session, SHAS[3], 1.7e-3)
    again = _steps()
    assert again == [Bisect(1, 1, SHAS[3], attempt=1)]
    assert "bisect_log" not in _change(ranged_change).details
    with session_scope() as session:
        _measure(session, SHAS[3], 1.0e-3, attempt=1)
    # Median of 1.7 and 1.0 is 1.35x: a clear "good", so the search moves on to the later half.
    assert [s.sha for s in _steps()] == [SHAS[5]]
    log = _change(ranged_change).details["bisect_log"]
    assert log[0]["verdict"] == "good" and len(log[0]["runs"]) == 2


def test_the_third_run_decides_even_when_the_level_stays_unclear(ranged_change: int) -> None:
    for attempt in range(bisect.MAX_RUNS_PER_COMMIT):
        assert _steps() == [Bisect(1, 1, SHAS[3], attempt=attempt)]
        with session_scope() as session:
            _measure(session, SHAS[3], 1.8e-3, attempt=attempt)
    _steps()
    assert _change(ranged_change).details["bisect_log"][0]["verdict"] == "bad"  # 1.8x is nearer 3x than 1x


def test_a_pending_run_is_waited_for_not_doubled(ranged_change: int) -> None:
    assert len(_steps()) == 1
    with session_scope() as session:
        _measure(session, SHAS[3], None, state="running")
    assert _steps() == []


def test_a_midpoint_that_never_measures_is_skipped_like_git_bisect_skip(ranged_change: int) -> None:
    for attempt in range(bisect.MAX_RUNS_PER_COMMIT):
        assert _steps() == [Bisect(1, 1, SHAS[3], attempt=attempt)]
        with session_scope() as session:
            _measure(session, SHAS[3], None, attempt=attempt, state="errored")
    steps = _steps()
    change = _change(ranged_change)
    assert change.details["bisect_log"][0]["verdict"] == "skip"
    assert SHAS[3] not in change.details["bisect_range"] and len(steps) == 1
