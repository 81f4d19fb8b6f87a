"""The verdict on two single uploaded runs, by table: medians only, or samples when both sides have them."""

from __future__ import annotations

import numpy as np
import pytest

from roofwatch.service.analysis.single_runs import verdict

SAMPLES = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98]


@pytest.mark.parametrize(("base", "head", "base_median", "head_median", "run_noise", "direction", "threshold"), [
    ([], [], 1.0, 1.4, None, "inconclusive", 50.0),    # +40 %: unknown run-to-run noise cannot tell
    ([], [], 1.0, 1.03, None, "none", 50.0),           # +3 %: inside the 5 % that counts, whatever the noise
    ([], [], 1.0, 1.6, None, "regression", 50.0),      # +60 %: beyond the 50 % floor
    ([], [], 1.0, 0.6, None, "improvement", 50.0),     # -40 %: a 1.67x speedup is beyond 50 % as a ratio
    ([], [], 1.0, 1.10, 0.01, "regression", 5.0),      # noise known (1 %): the 5 % floor rules
    ([], [], 1.0, 1.10, 0.05, "inconclusive", 15.0),   # noisy series: 3 x 5 % covers +10 %, which counts
    ([], [], 1.0, 1.04, 0.05, "none", 15.0),           # ... and +4 % does not count
    ([1.0], SAMPLES, 1.0, 1.0, 0.01, "none", 5.0),     # too few samples on one side: medians decide
    (SAMPLES, SAMPLES, 1.0, 1.0, None, "none", 50.0),  # samples alike: the interval lies inside ±5 %
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


def test_a_head_whose_own_samples_spread_wide_cannot_turn_a_slowdown_green() -> None:
    # Twice as slow, proven (Mann-Whitney p 2e-4), with four runs of ten slower still: their spread puts the
    # noise threshold at ±175 %. That is no "no change": the check must not pass on the head's own noise.
    rng = np.random.default_rng(1)
    base = list(0.020 * (1 + 0.01 * rng.standard_normal(10)))
    head = list(0.040 * (1 + 0.01 * rng.standard_normal(6))) + list(0.072 * (1 + 0.01 * rng.standard_normal(4)))
    found = verdict(base, head, float(np.median(base)), float(np.median(head)), run_noise=0.01)
    assert found.threshold_pct > 150 and found.change_pct == pytest.approx(100, abs=2)
    assert found.direction == "inconclusive" and "cannot tell" in found.reason
    same = verdict(base, list(reversed(base)), float(np.median(base)), float(np.median(base)), run_noise=0.01)
    assert same.direction == "none"


@pytest.mark.parametrize("higher_is_better", [False, True])
def test_no_change_is_said_only_inside_min_effect(higher_is_better: bool) -> None:
    # The whole interval must lie inside ±5 %: a noisy pair of runs whose medians barely moved is undecided.
    rng = np.random.default_rng(2)
    base = list(1.0 + 0.15 * rng.standard_normal(12))
    head = list(1.0 + 0.15 * rng.standard_normal(12))
    found = verdict(base, head, float(np.median(base)), float(np.median(head)), higher_is_better=higher_is_better,
                    run_noise=0.01)
    assert found.ci_high - found.ci_low > 10
    assert found.direction == "inconclusive"
