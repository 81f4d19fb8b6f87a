"""An A/B's rounds paired by round: table-driven, on numbers the test sets."""

from __future__ import annotations

import pytest

from roofwatch.ab.abtest import ABVerdict
from roofwatch.ab.rounds import (
    account,
    head_first,
    paired_orders,
    paired_rounds,
    round_selection,
    round_verdicts,
    still_open,
    stop_reason,
)
from roofwatch.common.envelope import MeasurementRecord, RoundRecord, SuiteResult


def _round(side: str, index: int, **medians: float) -> RoundRecord:
    measurements = [MeasurementRecord(name=name, median=value, iqr=0.0, min=value, mean=value, n=1)
                    for name, value in medians.items()]
    return RoundRecord(side=side, index=index,  # type: ignore[arg-type]
                       suites=[SuiteResult(name="bench", kind="benchmark", status="passed", measurements=measurements)])


@pytest.mark.parametrize(("rounds", "pairs"), [
    # paired by round, base first within each pair, whatever order the processes ran in
    ([_round("base", 0, a=1.0), _round("head", 0, a=2.0), _round("head", 1, a=2.1), _round("base", 1, a=1.1)],
     {"bench::a": ([1.0, 1.1], [2.0, 2.1])}),
    # a benchmark only one side measured in a round is not paired in that round
    ([_round("base", 0, a=1.0, b=5.0), _round("head", 0, a=2.0)], {"bench::a": ([1.0], [2.0])}),
    # a round only one side finished pairs nothing
    ([_round("base", 0, a=1.0), _round("head", 0, a=2.0), _round("base", 1, a=9.0)],
     {"bench::a": ([1.0], [2.0])}),
    ([], {}),
])
def test_paired_rounds(rounds: list[RoundRecord], pairs: dict[str, tuple[list[float], list[float]]]) -> None:
    assert paired_rounds(rounds) == pairs


def test_which_side_ran_first_follows_the_record_order() -> None:
    rounds = [_round("head", 0, a=2.0), _round("base", 0, a=1.0), _round("base", 1, a=1.0), _round("head", 1, a=2.0)]
    assert head_first(rounds) == {0: True, 1: False}
    assert paired_orders(rounds) == {"bench::a": [True, False]}


@pytest.mark.parametrize(("head", "direction"), [
    (2.0, "regression"),  # twice the time, every round: no noise can hide it
    (0.5, "improvement"),
    (1.0, "none"),  # identical, every round: no change
])
def test_round_verdicts_decide_each_benchmark(head: float, direction: str) -> None:
    base = [1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99]
    rounds = [r for i, b in enumerate(base) for r in (_round("base", i, a=b), _round("head", i, a=b * head))]
    verdict = round_verdicts(rounds, min_effect=0.05, min_effects={})
    assert list(verdict) == ["bench::a"] and verdict["bench::a"].direction == direction


def _timed(side: str, index: int, timer: str = "perf_counter", suite: str = "bench", **medians: float) -> RoundRecord:
    measurements = [MeasurementRecord(name=name, median=value, iqr=0.0, min=value, mean=value, n=1,
                                      timing={"timer": timer, "min_rounds": 5})
                    for name, value in medians.items()]
    return RoundRecord(side=side, index=index,  # type: ignore[arg-type]
                       suites=[SuiteResult(name=suite, kind="benchmark", status="passed", measurements=measurements)])


NOT_REPORTED = "not reported by the head (deselected, renamed, deleted, or it no longer collects)"


@pytest.mark.parametrize(("rounds", "renames", "unfinished", "paired", "missing", "new"), [
    # the same names on both sides: all paired
    ([_timed("base", 0, a=1, b=1), _timed("head", 0, a=1, b=1)], {}, {},
     {"bench::a": "bench::a", "bench::b": "bench::b"}, {}, []),
    # deselected on the head: missing, with why
    ([_timed("base", 0, a=1, b=1), _timed("head", 0, a=1)], {}, {}, {"bench::a": "bench::a"},
     {"bench::b": NOT_REPORTED}, []),
    # renamed without a declaration: one missing, one new
    ([_timed("base", 0, a=1), _timed("head", 0, a2=1)], {}, {}, {}, {"bench::a": NOT_REPORTED}, ["bench::a2"]),
    # a declared rename (bare name) pairs them
    ([_timed("base", 0, a=1), _timed("head", 0, a2=1)], {"a": "a2"}, {}, {"bench::a": "bench::a2"}, {}, []),
    # a qualified rename applies to its suite only
    ([_timed("base", 0, a=1), _timed("head", 0, a2=1)], {"other::a": "a2"}, {}, {}, {"bench::a": NOT_REPORTED},
     ["bench::a2"]),
    # a rename onto a name the base also reports does not steal that benchmark's pairing
    ([_timed("base", 0, a=1, b=1), _timed("head", 0, b=1)], {"a": "b"}, {}, {"bench::b": "bench::b"},
     {"bench::a": NOT_REPORTED}, []),
    # another timer on the head: not comparable, whatever the numbers
    ([_timed("base", 0, a=1), _timed("head", 0, timer="clock", a=1)], {}, {}, {},
     {"bench::a": "timed with other options on the head (timer perf_counter → clock): the numbers are not "
                  "comparable"}, []),
    # the head's suite broke: that is the reason given
    ([_timed("base", 0, a=1)], {}, {"bench": "exit 4: file or directory not found"}, {},
     {"bench::a": "the head's run of suite bench did not finish: exit 4: file or directory not found"}, []),
    # benchmarks the base never reported are new, whatever round they appear in
    ([_timed("base", 0, a=1), _timed("head", 0, a=1), _timed("head", 1, a=1, c=2)], {}, {},
     {"bench::a": "bench::a"}, {}, ["bench::c"]),
])
def test_every_benchmark_of_the_base_is_accounted_for(rounds: list[RoundRecord], renames: dict[str, str],
                                                      unfinished: dict[str, str], paired: dict[str, str],
                                                      missing: dict[str, str], new: list[str]) -> None:
    found = account(rounds, renames, unfinished)
    assert (found.paired, found.missing, found.new) == (paired, missing, new)


def test_a_renamed_pair_is_decided_under_the_base_name() -> None:
    base = [1.00, 1.01, 0.99, 1.02, 0.98, 1.00]
    rounds = [r for i, b in enumerate(base) for r in (_timed("base", i, a=b), _timed("head", i, a2=2 * b))]
    assert round_verdicts(rounds, 0.05, {}) == {}  # unpaired: nothing decided
    decided = round_verdicts(rounds, 0.05, {}, renames={"a": "a2"})
    assert list(decided) == ["bench::a"] and decided["bench::a"].direction == "regression"
    assert paired_orders(rounds, {"a": "a2"}) == {"bench::a": [False] * len(base)}


def test_incomparable_timing_is_never_decided() -> None:
    rounds = [r for i in range(6) for r in (_timed("base", i, a=1.0), _timed("head", i, timer="clock", a=1.5))]
    assert paired_rounds(rounds) == {} and round_verdicts(rounds, 0.05, {}) == {}


def _verdict(direction: str, needed: int | None = None) -> ABVerdict:
    return ABVerdict(0.0, -1.0, 1.0, 0.5, 0.5, 1.0, 2.0, 3.0, 4, direction, "", rounds_needed=needed)  # type: ignore[arg-type]


DECIDED = {"b::regressed": _verdict("regression"), "b::same": _verdict("none"), "b::faster": _verdict("improvement")}


@pytest.mark.parametrize(("verdicts", "done", "wanted", "expected"), [
    # before min_rounds every paired benchmark is open, decided or not
    ({**DECIDED, "b::noisy": _verdict("inconclusive", 6)}, 2, None, {"b::regressed", "b::same", "b::faster", "b::noisy"}),
    # after, only the undecided ones more rounds can settle within the cap (10)
    ({**DECIDED, "b::noisy": _verdict("inconclusive", 6)}, 3, None, {"b::noisy"}),
    ({**DECIDED, "b::hopeless": _verdict("inconclusive", 40)}, 3, None, set()),
    ({**DECIDED, "b::unknowable": _verdict("inconclusive", None)}, 5, None, set()),
    ({**DECIDED, "b::noisy": _verdict("inconclusive", 10)}, 9, None, {"b::noisy"}),
    # a confirmation measures its candidates only
    ({**DECIDED, "b::noisy": _verdict("inconclusive", 6)}, 3, {"b::regressed"}, set()),
    ({**DECIDED, "b::noisy": _verdict("inconclusive", 6)}, 2, {"b::noisy", "b::absent"}, {"b::noisy"}),
    ({}, 3, None, set()),
])
def test_which_benchmarks_a_later_round_measures(verdicts: dict[str, ABVerdict], done: int,
                                                 wanted: set[str] | None, expected: set[str]) -> None:
    assert still_open(verdicts, done, 3, 10, wanted) == expected


@pytest.mark.parametrize(("verdicts", "done", "cap", "wanted", "expected"), [
    # a cap someone asked for is measured up to: a projection past it, or past any cap, closes nothing
    ({**DECIDED, "b::hopeless": _verdict("inconclusive", 40)}, 3, 16, None, {"b::hopeless"}),
    ({**DECIDED, "b::unknowable": _verdict("inconclusive", None)}, 3, 16, None, {"b::unknowable"}),
    ({**DECIDED, "b::noisy": _verdict("inconclusive", 6)}, 3, 16, None, {"b::noisy"}),
    ({**DECIDED, "b::hopeless": _verdict("inconclusive", 40)}, 15, 16, None, {"b::hopeless"}),
    # at the cap it is still open: the rounds end by their count ("round cap", listed as left open)
    ({**DECIDED, "b::hopeless": _verdict("inconclusive", 40)}, 16, 16, None, {"b::hopeless"}),
    # decided benchmarks stay closed, and a confirmation still measures only its candidates
    (DECIDED, 3, 16, None, set()),
    ({**DECIDED, "b::hopeless": _verdict("inconclusive", 40)}, 3, 16, {"b::regressed"}, set()),
    # before min_rounds every paired benchmark is open, as without an asked-for cap
    ({**DECIDED, "b::hopeless": _verdict("inconclusive", 40)}, 2, 16, None,
     {"b::regressed", "b::same", "b::faster", "b::hopeless"}),
])
def test_an_asked_for_cap_keeps_every_undecided_benchmark_open_up_to_it(
        verdicts: dict[str, ABVerdict], done: int, cap: int, wanted: set[str] | None, expected: set[str]) -> None:
    assert still_open(verdicts, done, 3, cap, wanted, to_cap=True) == expected
    if expected - (set(wanted) if wanted else set()) and done >= 3:
        # the rule it replaces: the same benchmarks projected past the cap were dropped after three rounds
        hopeless = {k for k in expected if (verdicts[k].rounds_needed or cap + 1) > cap}
        assert not hopeless & still_open(verdicts, done, 3, cap, wanted)
    # while any is open no "cannot settle" ends the rounds early; the cap itself ends them ("round cap")
    assert (stop_reason(verdicts, expected, wanted) is None) == bool(expected)


@pytest.mark.parametrize(("keys", "pairing", "expected"), [
    ({"bench::a", "bench::b", "other::c"}, {},
     {"base": {"bench": {"a", "b"}, "other": {"c"}}, "head": {"bench": {"a", "b"}, "other": {"c"}}}),
    # a renamed benchmark runs under its head name on the head
    ({"bench::a"}, {"bench::a": "bench::a_v2"}, {"base": {"bench": {"a"}}, "head": {"bench": {"a_v2"}}}),
    # a peak-memory benchmark is measured by its suite's process, under the same test name
    ({"bench:memory::a", "bench::b"}, {}, {"base": {"bench": {"a", "b"}}, "head": {"bench": {"a", "b"}}}),
    ({"bench:memory::a"}, {"bench:memory::a": "bench:memory::a_v2"},
     {"base": {"bench": {"a"}}, "head": {"bench": {"a_v2"}}}),
    (set(), {}, {"base": {}, "head": {}}),
])
def test_each_side_runs_the_same_benchmarks_under_its_own_names(
        keys: set[str], pairing: dict[str, str], expected: dict[str, dict[str, set[str]]]) -> None:
    assert round_selection(keys, pairing) == expected


@pytest.mark.parametrize(("verdicts", "open_keys", "wanted", "reason"), [
    (DECIDED, set(), None, "decided"),
    ({**DECIDED, "b::noisy": _verdict("inconclusive", 6)}, {"b::noisy"}, None, None),
    ({**DECIDED, "b::hopeless": _verdict("inconclusive", 40)}, set(), None, "cannot settle"),
    # an undecided benchmark nobody asked about does not keep a confirmation from "decided"
    ({**DECIDED, "b::hopeless": _verdict("inconclusive", 40)}, set(), {"b::regressed"}, "decided"),
    ({}, set(), None, "decided"),
])
def test_why_rounds_stop(verdicts: dict[str, ABVerdict], open_keys: set[str], wanted: set[str] | None,
                         reason: str | None) -> None:
    assert stop_reason(verdicts, open_keys, wanted) == reason
