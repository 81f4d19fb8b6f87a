"""Branch-order reading of a series: failure episodes, candidate steps, overlap, shifts. Pure, on numbers."""

from __future__ import annotations

import math

import pytest

from roofwatch.service.analysis import environment, lifecycle
from roofwatch.service.analysis.history import Outcome, Point, failure_episodes, steps


def _outcomes(pattern: str, first: int = 1) -> list[Outcome]:
    """``"..xx."``: pass, pass, fail, fail, pass at positions first, first+1, …"""
    return [Outcome(first + i, f"c{first + i}", mark == "x") for i, mark in enumerate(pattern)]


@pytest.mark.parametrize(("pattern", "expected"), [
    (".....", []),
    ("..x..", [("c2", "c3", "c4")]),
    ("..xxx", [("c2", "c3", None)]),
    ("xx...", [(None, "c1", "c3")]),
    (".x.x.", [("c1", "c2", "c3"), ("c3", "c4", "c5")]),  # failed again later: a second episode
])
def test_failure_episodes(pattern: str, expected: list[tuple[str | None, str, str | None]]) -> None:
    found = [(e.last_good.sha if e.last_good else None, e.first_bad.sha, e.fixed_at.sha if e.fixed_at else None)
             for e in failure_episodes(_outcomes(pattern))]
    assert found == expected


def test_failure_episodes_do_not_depend_on_the_order_outcomes_arrive_in() -> None:
    outcomes = _outcomes("..xx.x")
    shuffled = [outcomes[i] for i in (5, 0, 3, 1, 4, 2)]
    assert failure_episodes(shuffled) == failure_episodes(outcomes)


def _series(medians: list[float], spread: float = 0.01) -> list[Point]:
    """A series with tight samples around each median (as an interleaved run would give)."""
    return [Point(i + 1, f"c{i + 1}", m, tuple(m * (1 + spread * k / 10) for k in range(-5, 6)))
            for i, m in enumerate(medians)]


@pytest.mark.parametrize(("medians", "newly", "expected"), [
    ([1.0, 1.0, 1.0, 2.0, 2.0, 2.0], {4}, [(3, 4, "regression")]),
    ([1.0, 1.0, 1.0, 2.0], {4}, [(3, 4, "regression")]),  # too short for change points: adjacent test
    ([2.0, 2.0, 2.0, 0.4], {4}, [(3, 4, "improvement")]),
    ([1.0, 1.0, 1.0, 1.0, 1.0], {5}, []),
    ([1.0, 2.0], {2}, [(1, 2, "regression")]),  # the first two commits measured
    ([1.0, 1.0, 2.0, 2.0, 4.0, 4.0], {3, 5}, [(2, 3, "regression"), (4, 5, "regression")]),  # two commits apart
])
def test_steps(medians: list[float], newly: set[int], expected: list[tuple[int, int, str]]) -> None:
    found = steps(_series(medians), newly_measured=newly, higher_is_better=False)
    assert [(s.good.position, s.bad.position, s.direction(False)) for s in found] == expected


@pytest.mark.parametrize(("medians", "newly", "confirmed_at", "expected"), [
    # Without a confirmed step, the commits after one are held against the level before it:
    # each is a candidate again (one A/B each, rejected).
    ([1.0, 1.0, 1.0, 2.0, 2.0], {5}, set(), [(4, 5, "regression")]),
    ([1.0, 1.0, 1.0, 2.0, 2.0, 2.0], {6}, set(), [(5, 6, "regression")]),
    # Confirmed at commit 4: the level starts there, and the commits after it raise nothing.
    ([1.0, 1.0, 1.0, 2.0, 2.0], {5}, {4}, []),
    ([1.0, 1.0, 1.0, 2.0, 2.0, 2.0], {6}, {4}, []),
    ([2.0, 2.0, 2.0, 0.4, 0.4], {5}, {4}, []),
    # A real step after a confirmed one is still found, in either direction.
    ([1.0, 1.0, 1.0, 2.0, 2.0, 4.0], {6}, {4}, [(5, 6, "regression")]),
    ([1.0, 1.0, 1.0, 2.0, 2.0, 1.0], {6}, {4}, [(5, 6, "improvement")]),
    # A confirmed step further back than the point does not hide a slowdown behind one slow run:
    # commit 5 was slow, commit 6 is as slow, and both stand above the level since commit 2.
    ([1.0, 1.0, 1.0, 1.0, 2.0, 2.0], {6}, {2}, [(5, 6, "regression")]),
])
def test_steps_after_a_confirmed_change_are_held_against_its_level(
        medians: list[float], newly: set[int], confirmed_at: set[int], expected: list[tuple[int, int, str]]) -> None:
    # Only the newly measured commit's candidates: a change point at commit 4 is a sighting of the
    # confirmed change itself, which the flow matches to it.
    found = steps(_series(medians), newly_measured=newly, higher_is_better=False, confirmed_at=confirmed_at)
    assert [(s.good.position, s.bad.position, s.direction(False)) for s in found
            if s.bad.position in newly] == expected


def test_a_change_point_says_it_was_placed_and_an_adjacent_step_does_not() -> None:
    """Only a step the change-point search placed may lie a commit or two off (its confirmation looks around it)."""
    long = steps(_series([1.0] * 6 + [2.0] * 6), newly_measured={12}, higher_is_better=False)
    short = steps(_series([1.0, 1.0, 1.0, 2.0]), newly_measured={4}, higher_is_better=False)
    assert [(s.bad.position, s.details().get("placed")) for s in long] == [(7, True)]
    assert [(s.bad.position, s.details().get("placed")) for s in short] == [(4, None)]


def test_two_slow_runs_of_five_do_not_hide_a_step_in_the_medians() -> None:
    # rmsnorm's samples on a loaded two-core host: a 2x sleep at c3, two of its five runs slowed a further 80 %.
    # Their spread puts the samples' own threshold at ±179 %; the medians moved 2.06x.
    samples = [(0.02044, 0.02012, 0.02416, 0.02399, 0.02024), (0.02044, 0.02051, 0.02014, 0.02012, 0.02014),
               (0.07444, 0.04010, 0.07401, 0.04217, 0.04014)]
    series = [Point(i + 1, f"c{i + 1}", float(sorted(s)[2]), s) for i, s in enumerate(samples)]
    found = steps(series, newly_measured={3}, higher_is_better=False)
    assert [(s.good.position, s.bad.position, s.direction(False)) for s in found] == [(2, 3, "regression")]


def test_a_step_is_found_whichever_side_was_measured_last() -> None:
    series = _series([1.0, 1.0, 1.0, 2.0, 2.0])
    # Commit 3 measured after commit 4: the step (3, 4] is seen from its good side.
    found = steps(series, newly_measured={3}, higher_is_better=False)
    assert [(s.good.position, s.bad.position) for s in found] == [(3, 4)]


def test_throughput_direction_follows_higher_is_better() -> None:
    found = steps(_series([1.0, 1.0, 1.0, 2.0]), newly_measured={4}, higher_is_better=True)
    assert [s.direction(True) for s in found] == ["improvement"]


@pytest.mark.parametrize(("a", "b", "overlap"), [
    ((2, 3), (2, 3), True),
    ((0, 7), (2, 3), True),   # a wide sighting holds a narrowed change
    ((2, 3), (3, 4), False),  # adjacent steps are different commits
    ((None, 1), (None, 1), True),
    ((None, 3), (3, 5), False),
    ((4, 8), (1, 5), True),
])
def test_overlap(a: tuple[int | None, int], b: tuple[int | None, int], overlap: bool) -> None:
    assert lifecycle.overlaps(*a, *b) is overlap
    assert lifecycle.overlaps(*b, *a) is overlap


@pytest.mark.parametrize(("start", "end", "narrowed"), [(None, 1, True), (3, 4, True), (3, 5, False)])
def test_narrowed(start: int | None, end: int, narrowed: bool) -> None:
    assert lifecycle.narrowed(start, end) is narrowed


def test_phase_after_narrowing() -> None:
    assert lifecycle.phase_after_narrowing("perf-regression") == lifecycle.CONFIRMING
    assert lifecycle.phase_after_narrowing("correctness-failure") == lifecycle.CONFIRMED


@pytest.mark.parametrize(("ratios", "significant", "factor"), [
    ([1.5] * 10, [True] * 10, 1.5),                               # everything 1.5x slower: the machine
    ([1.5] * 9 + [1.0], [True] * 9 + [False], 1.5),               # 90 % moved alike
    ([2.0, 1.0, 1.0, 1.0, 1.0], [True, False, False, False, False], None),  # one kernel: the code
    ([1.5] * 5 + [0.5] * 5, [True] * 10, None),                   # both ways: not one factor
    ([1.2, 1.5, 2.5, 4.0, 1.3], [True] * 5, None),                # all slower, by different factors
    ([1.5, 1.5], [True, True], None),                             # too few to tell
])
def test_common_shift(ratios: list[float], significant: list[bool], factor: float | None) -> None:
    found = environment.common_shift([math.log(r) for r in ratios], significant)
    assert (found is None) if factor is None else (found == pytest.approx(factor))
