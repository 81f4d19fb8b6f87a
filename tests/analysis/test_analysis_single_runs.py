"""The verdict on two single uploaded runs, by table: medians only, or samples when both sides have them."""

from __future__ import annotations

import pytest

from roofwatch.service.analysis.single_runs import verdict

SAMPLES = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98]


@pytest.mark.parametrize(("base", "head", "base_median", "head_median", "run_noise", "direction", "threshold"), [
    ([], [], 1.0, 1.4, None, "none", 50.0),            # +40 %: unknown run-to-run noise hides it
    ([], [], 1.0, 1.6, None, "regression", 50.0),      # +60 %: beyond the 50 % floor
    ([], [], 1.0, 0.6, None, "improvement", 50.0),     # -40 %: a 1.67x speedup is beyond 50 % as a ratio
    ([], [], 1.0, 1.10, 0.01, "regression", 5.0),      # noise known (1 %): the 5 % floor rules
    ([], [], 1.0, 1.10, 0.05, "none", 15.0),           # noisy series: 3 x 5 %
    ([1.0], SAMPLES, 1.0, 1.0, 0.01, "none", 5.0),     # too few samples on one side: medians decide
    (SAMPLES, [2 * s for s in SAMPLES], 1.0, 2.0, 0.01, "regression", None),  # samples: Mann-Whitney
])
def test_single_run_verdicts(base: list[float], head: list[float], base_median: float, head_median: float,
                             run_noise: float | None, direction: str, threshold: float | None) -> None:
    found = verdict(base, head, base_median, head_median, run_noise=run_noise)
    assert found.direction == direction
    if threshold is not None:
        assert found.threshold_pct == pytest.approx(threshold)


def test_higher_is_better_flips_the_sign() -> None:
    assert verdict([], [], 100.0, 40.0, higher_is_better=True, run_noise=0.01).direction == "regression"


@pytest.mark.parametrize(("base_median", "head_median", "higher_is_better", "direction"), [
    # one kernel seen as a time and as a throughput, at a 5 % threshold: the same verdict either way
    (1.0, 1.0515, False, "regression"),  # 5.15 % more time per unit of work
    (100.0, 95.1, True, "regression"),   # ... is 4.9 % less throughput
    (1.0, 1.0490, False, "none"),
    (100.0, 95.33, True, "none"),
    # a throughput that more than doubled: its signed change is below -100 %, no ratio of times
    (100.0, 300.0, True, "improvement"),
    (100.0, 200.0, True, "improvement"),
])
def test_time_and_throughput_are_compared_as_the_same_ratio(
        base_median: float, head_median: float, higher_is_better: bool, direction: str) -> None:
    found = verdict([], [], base_median, head_median, higher_is_better=higher_is_better, run_noise=0.001)
    assert found.threshold_pct == pytest.approx(5.0)
    assert found.direction == direction


def test_a_zero_median_is_an_error() -> None:
    with pytest.raises(ValueError, match="positive"):
        verdict([], [], 0.0, 1.0)
