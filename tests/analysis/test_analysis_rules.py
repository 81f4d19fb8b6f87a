"""Table-driven tests of the small pure rules: new failures and fixes, the environment shift,
Benjamini–Hochberg adjustment, and the change lifecycle."""

from __future__ import annotations

import math

import pytest

from roofwatch.ab import fdr
from roofwatch.service.analysis import correctness, environment, lifecycle

# --- correctness: which tests broke, which were fixed ------------------------------------------

P, F, E, S = "passed", "failed", "error", "skipped"


@pytest.mark.parametrize(("base", "head", "broke", "mended"), [
    ({"a": P}, {"a": F}, ["a"], []),
    ({"a": P}, {"a": E}, ["a"], []),                      # an error is a failure too
    ({"a": F}, {"a": F}, [], []),                         # already failing: not new
    ({"a": F}, {"a": E}, [], []),                         # failing either way: not new
    ({"a": F}, {"a": P}, [], ["a"]),
    ({"a": E}, {"a": P}, [], ["a"]),
    ({}, {"new": F}, ["new"], []),                        # a new test that fails is a new failure
    ({"a": S}, {"a": F}, ["a"], []),                      # skipped on base, failing on head
    ({"a": F}, {"a": S}, [], []),                         # skipped on head: not known to be fixed
    ({"a": F, "b": P}, {"b": F, "a": P}, ["b"], ["a"]),
    ({"b": P, "a": P}, {"b": F, "a": F}, ["a", "b"], []),  # sorted
    ({"gone": F}, {}, [], []),                            # a deleted test is neither
])
def test_new_failures_and_fixes(base: dict[str, str], head: dict[str, str], broke: list[str],
                                mended: list[str]) -> None:
    assert correctness.new_failures(base, head) == broke
    assert correctness.fixed(base, head) == mended


def test_with_no_base_every_head_failure_counts() -> None:
    assert correctness.new_failures(None, {"a": F, "b": P, "c": E}) == ["a", "c"]


# --- environment: the machine moved everything, not the code -----------------------------------

UP = math.log(1.3)


@pytest.mark.parametrize(("ratios", "significant", "factor"), [
    ([UP] * 10, [True] * 10, 1.3),                              # everything 30 % slower together
    ([-UP] * 10, [True] * 10, 1 / 1.3),                         # or faster
    ([UP] * 8 + [0.0, 0.0], [True] * 8 + [False] * 2, 1.3),     # 80 % moved: still the machine
    ([UP] * 7 + [0.0] * 3, [True] * 7 + [False] * 3, None),     # 70 %: what the change touched
    ([UP] * 5 + [-UP] * 5, [True] * 10, None),                  # both ways: code
    ([UP * f for f in (0.5, 1, 1.5, 1, 1, 1, 1, 1, 1, 1)], [True] * 10, None),  # factors too spread
    ([UP * f for f in (0.8, 1, 1.2, 1, 1, 1, 1, 1, 1, 1)], [True] * 10, 1.3),   # within ±25 %
    ([UP] * 2, [True] * 2, None),                               # too few benchmarks to tell
    ([UP] * 10, [False] * 10, None),                            # nothing beyond its threshold
    ([UP] * 10, [True] * 9, None),                              # inputs that do not pair up
])
def test_environment_shift(ratios: list[float], significant: list[bool], factor: float | None) -> None:
    found = environment.common_shift(ratios, significant)
    if factor is None:
        assert found is None
    else:
        assert found == pytest.approx(factor)


# --- fdr: Benjamini–Hochberg --------------------------------------------------------------------


@pytest.mark.parametrize(("p", "adjusted"), [
    ([], []),
    ([0.01], [0.01]),
    ([0.01, 0.04], [0.02, 0.04]),
    ([0.04, 0.01], [0.04, 0.02]),                      # input order kept
    ([0.01, 0.02, 0.03, 0.04], [0.04, 0.04, 0.04, 0.04]),
    ([0.001, 0.5, 0.9], [0.003, 0.75, 0.9]),
    ([0.9, 0.95], [0.95, 0.95]),                       # monotone, never above 1
])
def test_benjamini_hochberg(p: list[float], adjusted: list[float]) -> None:
    assert fdr.adjust(p) == pytest.approx(adjusted)


def test_one_low_p_among_many_is_not_a_discovery_by_itself() -> None:
    """Why the adjustment exists: 1,000 series at 1 % flag ten by chance; adjusted, none is."""
    p = [0.005] + [0.5] * 999
    assert min(fdr.adjust(p)) > 0.01


# --- lifecycle ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b", "shared"), [
    ((3, 5), (4, 6), True),
    ((3, 5), (5, 7), False),      # (3, 5] and (5, 7] share no commit
    ((None, 5), (0, 1), True),    # from the first commit on
    ((None, 2), (None, 9), True),
    ((7, 9), (None, 7), False),
    ((0, 10), (4, 5), True),      # one inside the other
])
def test_two_sightings_overlap_when_their_ranges_share_a_commit(a: tuple[int | None, int], b: tuple[int | None, int],
                                                                 shared: bool) -> None:
    assert lifecycle.overlaps(*a, *b) is shared
    assert lifecycle.overlaps(*b, *a) is shared  # symmetric


@pytest.mark.parametrize(("start", "end", "known"), [
    (4, 5, True), (4, 6, False), (None, 0, True), (None, 7, True), (0, 100, False)])
def test_the_first_bad_commit_is_known_when_nothing_unmeasured_lies_between(start: int | None, end: int,
                                                                           known: bool) -> None:
    assert lifecycle.narrowed(start, end) is known


@pytest.mark.parametrize(("kind", "phase"), [
    ("perf-regression", lifecycle.CONFIRMING), ("perf-improvement", lifecycle.CONFIRMING),
    ("correctness-failure", lifecycle.CONFIRMED), ("numerics-drift", lifecycle.CONFIRMED)])
def test_a_timing_step_is_confirmed_by_an_ab_a_test_outcome_is_certain(kind: str, phase: str) -> None:
    assert lifecycle.phase_after_narrowing(kind) == phase
