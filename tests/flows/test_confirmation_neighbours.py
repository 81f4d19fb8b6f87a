"""A change point named a commit or two off is found among its neighbours by A/B, on numbers the test sets.

A history of ten measured commits holds one real step at a commit the test picks; the detector named it at
commits 5 → 6. Every A/B the flow asks for is answered as an interleaved A/B of those two commits would be:
the step shows where the pair straddles it, and nowhere else. No timing is involved.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import select

from roofwatch.service.core.db import migrate, session_scope
from roofwatch.service.core.keys import comparison_key
from roofwatch.service.core.models import (
    Benchmark,
    Change,
    Commit,
    Comparison,
    ComparisonResult,
    Device,
    Measurement,
    Repository,
    Run,
    SuiteExecution,
    utcnow,
)
from roofwatch.service.flows import confirmation
from roofwatch.service.records import changes

POSITIONS = range(1, 11)
NAMED = (5, 6)  # where the detector placed the step: (last good, first bad)


def _sha(position: int) -> str:
    return f"{position:x}" * 40


@pytest.fixture
def history(roofwatch_env: Path) -> dict[str, int]:
    """Ten measured commits of one benchmark (positions 1-10), each with a history run of its own."""
    migrate()
    with session_scope() as session:
        repository = Repository(full_name="acme/kernels_n", clone_url="/nowhere")
        device = Device(fingerprint="cpu-0", device_class="cpu")
        session.add_all([repository, device])
        session.flush()
        benchmark = Benchmark(fingerprint="rmsnorm", repository_id=repository.id, suite="benchmarks",  # type: ignore[arg-type]
                              name="rmsnorm", device_class="cpu")
        session.add(benchmark)
        session.flush()
        ids = {"repository": repository.id, "device": device.id, "benchmark": benchmark.id}
        for position in POSITIONS:
            commit = Commit(repository_id=repository.id, sha=_sha(position), position=position)  # type: ignore[arg-type]
            session.add(commit)
            session.flush()
            run = Run(repository_id=repository.id, commit_id=commit.id, device_id=device.id,  # type: ignore[arg-type]
                      state="succeeded", idempotency_key=f"history:{position}")
            session.add(run)
            session.flush()
            session.add(Measurement(run_id=run.id, benchmark_id=benchmark.id, samples=[1.0], median=1.0,  # type: ignore[arg-type]
                                    iqr=0.0, min=1.0, mean=1.0, n=1, cv=0.0))
            ids[f"commit:{position}"] = commit.id  # type: ignore[assignment]
        return ids  # type: ignore[return-value]


def _named(ids: dict[str, int], placed: bool = True, kind: str = "perf-regression") -> int:
    """The candidate the detector raised at ``NAMED``; ``placed``: by the change-point search (else the adjacent test)."""
    good, bad = NAMED
    with session_scope() as session:
        change = Change(repository_id=ids["repository"], benchmark_id=ids["benchmark"], kind=kind, phase="confirming",
                        device_id=ids["device"], range_start_sha=_sha(good), range_end_sha=_sha(bad),
                        range_start_position=good, range_end_position=bad, first_bad_commit_id=ids[f"commit:{bad}"],
                        details={"before": 1.0, "after": 1.5, "shift": "location", **({"placed": True} if placed else {})})
        session.add(change)
        session.flush()
        return change.id  # type: ignore[return-value]


def _ab(ids: dict[str, int], good: str, bad: str, ratio: float, attempt: int = 0, *, settled: bool = True) -> int:
    """A finished confirm A/B of ``good`` → ``bad`` whose head/base median is ``ratio``; beyond 1.1× is significant.
    ``settled=False``: its rounds could not tell (inconclusive)."""
    positions = {_sha(p): p for p in POSITIONS}
    with session_scope() as session:
        repository = session.get(Repository, ids["repository"])
        assert repository is not None
        comparison = Comparison(
            repository_id=ids["repository"], base_commit_id=ids[f"commit:{positions[good]}"],
            head_commit_id=ids[f"commit:{positions[bad]}"], device_id=ids["device"], purpose="confirm",
            state="succeeded", finished_at=utcnow(),
            idempotency_key=comparison_key(repository, good, bad, "cpu-0", "confirm", attempt))
        session.add(comparison)
        session.flush()
        direction = "regression" if ratio > 1.1 else "improvement" if ratio < 1 / 1.1 else "none"
        direction = direction if settled else "inconclusive"
        reason = {"none": "not significant (p=0.5 ≥ 0.05)",
                  "inconclusive": "the 99 % interval is wider than ±2 %"}.get(direction, direction)
        session.add(ComparisonResult(
            comparison_id=comparison.id, benchmark_id=ids["benchmark"], base_median=1.0, head_median=ratio,  # type: ignore[arg-type]
            change_pct=(ratio - 1) * 100, q_value=1e-4 if direction != "none" else 0.5, threshold_pct=5.0,
            direction=direction, reason=reason, base_values=[1.0] * 3, head_values=[ratio] * 3))
        return comparison.id  # type: ignore[return-value]


def _settle(ids: dict[str, int], step_at: int | None, ratio: float = 1.5) -> list[tuple[int, int]]:
    """Answer every A/B the flow asks for, as the code would: the step shows where a pair straddles ``step_at``
    (its first bad commit; None: there is no step). The pairs measured, in order, by position."""
    positions = {_sha(p): p for p in POSITIONS}
    measured: list[tuple[int, int]] = []
    with session_scope() as session:
        asked = confirmation.pending(session, ids["repository"])
    while asked:
        assert len(asked) == 1, asked
        good, bad = positions[asked[0].good_sha], positions[asked[0].bad_sha]
        measured.append((good, bad))
        moved = step_at is not None and good < step_at <= bad
        comparison = _ab(ids, asked[0].good_sha, asked[0].bad_sha, ratio if moved else 1.0)
        with session_scope() as session:
            confirmation.apply(session, comparison)
            asked = confirmation.pending(session, ids["repository"])
        assert len(measured) < 10, measured
    return measured


def _change(change_id: int) -> Change:
    with session_scope() as session:
        change = session.get(Change, change_id)
        assert change is not None
        session.expunge(change)
        return change


@pytest.mark.parametrize("step_at", [3, 4, 5, 7, 8, 9])
def test_a_step_named_up_to_three_commits_off_is_confirmed_at_its_own_commit(history: dict[str, int],
                                                                          step_at: int) -> None:
    change_id = _named(history)
    measured = _settle(history, step_at)
    change = _change(change_id)
    assert change.phase == "confirmed"
    assert (change.range_start_position, change.range_end_position) == (step_at - 1, step_at)
    assert change.first_bad_commit_id == history[f"commit:{step_at}"]
    assert change.details["named"] == [_sha(5), _sha(6)]
    assert "neighbours" not in change.details
    # the named pair, one A/B across the three commits either side, then halves of it down to one pair
    assert measured[:2] == [NAMED, (2, 9)]
    assert measured[-1] == (step_at - 1, step_at) and len(measured) <= 6


def test_a_step_at_its_named_commit_takes_one_ab(history: dict[str, int]) -> None:
    change_id = _named(history)
    assert _settle(history, 6) == [NAMED]
    assert _change(change_id).phase == "confirmed"


@pytest.mark.parametrize("step_at", [None, 2, 10])
def test_no_step_among_the_neighbours_rejects_it_after_one_more_ab(history: dict[str, int],
                                                                  step_at: int | None) -> None:
    change_id = _named(history)
    assert _settle(history, step_at) == [NAMED, (2, 9)]
    change = _change(change_id)
    assert change.phase == "rejected"
    assert change.details["rejected"].endswith(f"not found among the commits around {_sha(6)[:12]}, where it "
                                               "was named, either")


@pytest.mark.parametrize("placed", [True, False])
def test_a_pair_still_inconclusive_after_its_last_ab_is_sought_among_the_neighbours(history: dict[str, int],
                                                                                    placed: bool) -> None:
    """Two commits of the same code may stay inconclusive within a few rounds on a busy machine: the pair is
    measured again, and once its last A/B is spent a placed step is sought among its neighbours, as after no
    change; one the adjacent test saw between the pair's own samples is rejected."""
    change_id = _named(history, placed=placed)
    for attempt in range(confirmation.MAX_ATTEMPTS):
        with session_scope() as session:
            asked = confirmation.pending(session, history["repository"])
        assert [(a.good_sha, a.bad_sha, a.attempt) for a in asked] == [(_sha(5), _sha(6), attempt)]
        comparison = _ab(history, _sha(5), _sha(6), 1.0, attempt, settled=False)
        with session_scope() as session:
            confirmation.apply(session, comparison)
    measured = _settle(history, 8)
    change = _change(change_id)
    if not placed:
        assert measured == [] and change.phase == "rejected"
        return
    assert measured[0] == (2, 9) and measured[-1] == (7, 8)
    assert change.phase == "confirmed" and change.first_bad_commit_id == history["commit:8"]
    assert change.details["named"] == [_sha(5), _sha(6)]


def test_a_step_the_adjacent_test_saw_is_decided_on_its_pair_alone(history: dict[str, int]) -> None:
    """A step seen between two commits' own samples was not placed by a search: there is nothing to look around."""
    change_id = _named(history, placed=False)
    assert _settle(history, 7) == [NAMED]
    assert _change(change_id).phase == "rejected"


def test_a_move_the_other_way_at_the_pair_rejects_it_at_once(history: dict[str, int]) -> None:
    change_id = _named(history)
    assert _settle(history, 6, ratio=0.5) == [NAMED]
    assert _change(change_id).phase == "rejected"


def test_during_the_search_a_later_sighting_in_the_span_is_the_same_change(history: dict[str, int]) -> None:
    change_id = _named(history)
    comparison = _ab(history, _sha(5), _sha(6), 1.0)
    with session_scope() as session:
        confirmation.apply(session, comparison)
        change = session.get(Change, change_id)
        assert change is not None and change.phase == "confirming" and change.first_bad_commit_id is None
        assert (change.range_start_position, change.range_end_position) == (2, 9)
        for sighting in ((6, 7), (2, 3), (8, 9)):
            same = changes.find_same(session, repository_id=history["repository"], kind="perf-regression",
                                     device_id=history["device"], benchmark_id=history["benchmark"],
                                     start=sighting[0], end=sighting[1])
            assert same is not None and same.id == change_id


def test_a_span_pair_measured_already_is_read_not_measured_again(history: dict[str, int]) -> None:
    """The A/B across the neighbours was measured before (for another candidate of the same pair): the search
    reads it and asks for the next pair at once."""
    change_id = _named(history)
    _ab(history, _sha(2), _sha(9), 1.5)
    comparison = _ab(history, _sha(5), _sha(6), 1.0)
    with session_scope() as session:
        confirmation.apply(session, comparison)
        asked = confirmation.pending(session, history["repository"])
    assert [(a.good_sha, a.bad_sha) for a in asked] == [(_sha(2), _sha(5))]
    change = _change(change_id)
    assert change.details["neighbours"]["found"] is True
    assert (change.range_start_position, change.range_end_position) == (2, 9)


def test_near_the_newest_commit_the_span_reaches_only_as_far_as_is_measured(history: dict[str, int]) -> None:
    with session_scope() as session:  # the history ends at commit 7
        newer = session.exec(select(Run).where(Run.commit_id.in_(  # type: ignore[attr-defined]
            [history[f"commit:{p}"] for p in (8, 9, 10)]))).all()
        for measurement in session.exec(select(Measurement).where(
                Measurement.run_id.in_([run.id for run in newer]))).all():  # type: ignore[attr-defined]
            session.delete(measurement)
        session.flush()
        for run in newer:
            session.delete(run)
    change_id = _named(history)
    measured = _settle(history, 7)
    assert measured[:2] == [NAMED, (2, 7)]
    assert _change(change_id).range_end_position == 7


def test_a_step_among_the_neighbours_that_is_another_change_already_is_not_named_twice(
        history: dict[str, int]) -> None:
    """The regression at commit 8 is confirmed; the candidate at 5 → 6 was noise. The search finds commit 8's step
    and leaves it to its change."""
    with session_scope() as session:
        known = Change(repository_id=history["repository"], benchmark_id=history["benchmark"], kind="perf-regression",
                       phase="confirmed", device_id=history["device"], range_start_sha=_sha(7), range_end_sha=_sha(8),
                       range_start_position=7, range_end_position=8, first_bad_commit_id=history["commit:8"])
        session.add(known)
        session.flush()
        known_id = known.id
    change_id = _named(history)
    measured = _settle(history, 8)
    change = _change(change_id)
    assert measured[-1] == (7, 8)
    assert change.phase == "rejected" and change.details["rejected"] == f"the step among its neighbours is change {known_id}"
    assert _change(known_id).phase == "confirmed"


def test_the_span_stops_where_the_suite_ran_other_files(history: dict[str, int]) -> None:
    """From commit 8 on, the suite took its benchmark files from outside the repository at another content: a step
    there is the benchmark's, never sought as the code's."""
    with session_scope() as session:
        for position in POSITIONS:
            run = session.exec(select(Run).where(Run.commit_id == history[f"commit:{position}"])).one()
            session.add(SuiteExecution(run_id=run.id, name="benchmarks", kind="benchmark", status="passed",  # type: ignore[arg-type]
                                       suite_files={"digest": "new" if position >= 8 else "old"}))
    change_id = _named(history)
    measured = _settle(history, 7)
    assert measured[:2] == [NAMED, (2, 7)]
    assert _change(change_id).phase == "confirmed" and _change(change_id).range_end_position == 7
