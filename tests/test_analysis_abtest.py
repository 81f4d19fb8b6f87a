"""Interleaved A/B verdicts: rounds as evidence, FDR across benchmarks, inconclusive → more rounds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from roofwatch.service.analysis.abtest import MIN_ROUNDS, needs_more_rounds, overall, verdicts


def _rounds(level: float, noise: float, n: int, rng: np.random.Generator) -> list[float]:
    return list(level * np.exp(rng.normal(0.0, noise, n)))


def test_identical_commits_are_never_reported_over_many_comparisons() -> None:
    rng = np.random.default_rng(7)
    reported = 0
    for _ in range(500):
        pairs = [(_rounds(1.0, 0.02, 8, rng), _rounds(1.0, 0.02, 8, rng), False) for _ in range(10)]
        reported += sum(v.direction in ("regression", "improvement") for v in verdicts(pairs))
    assert reported <= 2  # 5,000 benchmark comparisons; alpha 0.001 after FDR


def test_a_2x_slowdown_is_a_regression_with_interval_and_detectable_size() -> None:
    rng = np.random.default_rng(1)
    (v,) = verdicts([(_rounds(1.0, 0.03, 5, rng), _rounds(2.0, 0.03, 5, rng), False)])
    assert v.direction == "regression"
    assert 80 < v.change_pct < 120 and v.ci_low < v.change_pct < v.ci_high and v.ci_low > 0
    assert v.threshold_pct >= 2.0 and v.mde_pct >= v.threshold_pct and v.rounds == 5


def test_a_5x_speedup_is_an_improvement_though_under_100_percent() -> None:
    rng = np.random.default_rng(2)
    (v,) = verdicts([(_rounds(5.0, 0.3, 6, rng), _rounds(1.0, 0.3, 6, rng), False)])
    # -80 % is a factor of 5: sizes are compared as ratios, so a 90 % threshold does not hide it.
    assert v.direction == "improvement" and v.change_pct < -70 and v.threshold_pct > 80


def test_throughput_units_flip_the_sign() -> None:
    rng = np.random.default_rng(3)
    (v,) = verdicts([(_rounds(100.0, 0.01, 5, rng), _rounds(50.0, 0.01, 5, rng), True)])
    assert v.direction == "regression" and v.change_pct > 0


def test_a_change_below_k_times_the_measured_noise_is_not_reported() -> None:
    rng = np.random.default_rng(4)
    (v,) = verdicts([(_rounds(1.0, 0.05, 10, rng), _rounds(1.08, 0.05, 10, rng), False)])
    assert v.direction != "regression" and v.threshold_pct > 8


def test_too_few_rounds_is_inconclusive_and_asks_for_more() -> None:
    found = verdicts([([1.0, 1.1], [1.0, 1.2], False)])
    assert found[0].direction == "inconclusive" and math.isinf(found[0].threshold_pct)
    assert needs_more_rounds(found) and MIN_ROUNDS == 3


def test_a_wide_interval_is_inconclusive_until_rounds_narrow_it() -> None:
    rng = np.random.default_rng(5)
    base, head = _rounds(1.0, 0.01, 3, rng), _rounds(1.0, 0.01, 3, rng)
    head[0] *= 1.3  # one round far off: the 3-round interval reaches beyond the threshold
    assert verdicts([(base, head, False)])[0].direction == "inconclusive"
    more_base, more_head = base + _rounds(1.0, 0.01, 9, rng), head + _rounds(1.0, 0.01, 9, rng)
    assert verdicts([(more_base, more_head, False)])[0].direction == "none"


@pytest.mark.parametrize(("directions", "word"), [
    (["none", "none"], "no-change"), (["none", "improvement"], "improvement"),
    (["improvement", "inconclusive"], "inconclusive"), (["inconclusive", "regression"], "regression"),
])
def test_overall_word(directions: list[str], word: str) -> None:
    rng = np.random.default_rng(6)
    levels = {"none": 1.0, "improvement": 0.5, "regression": 2.0}
    pairs = []
    for d in directions:
        if d == "inconclusive":
            pairs.append(([1.0, 1.0], [1.0, 1.0], False))
        else:
            pairs.append((_rounds(1.0, 0.005, 6, rng), _rounds(levels[d], 0.005, 6, rng), False))
    assert overall(verdicts(pairs)) == word


def test_round_orders_are_balanced_in_pairs_shuffled_and_reproducible() -> None:
    from roofwatch.workers.ab import round_orders

    orders = round_orders(7, 10)
    assert len(orders) == 10 and round_orders(7, 10) == orders
    for i in range(0, 10, 2):  # each pair of rounds puts each side first once
        assert {orders[i], orders[i + 1]} == {("base", "head"), ("head", "base")}
    patterns = {tuple(round_orders(seed, 8)) for seed in range(20)}
    assert len(patterns) > 4  # not the fixed A B, B A, A B, … that a periodic neighbour can align with
    assert len(round_orders(1, 3)) == 3
