"""An A/B's rounds paired by round: table-driven, on numbers the test sets."""

from __future__ import annotations

import pytest

from roofwatch.common.envelope import MeasurementRecord, RoundRecord, SuiteResult
from roofwatch.service.analysis.ab_rounds import head_first, paired_orders, paired_rounds, round_verdicts


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
