"""The pure comparison: significance and effect size, never a verdict from noise alone."""

from __future__ import annotations

import numpy as np
import pytest

from roofwatch.ab.fdr import adjust
from roofwatch.service.analysis.compare import UNKNOWN_RUN_NOISE_FLOOR, compare, run_to_run_noise
from roofwatch.service.analysis.correctness import fixed, new_failures


def _samples(center: float, cv: float, n: int = 40, seed: int = 0) -> list[float]:
    return list(np.random.default_rng(seed).normal(center, center * cv, n))


def test_identical_distributions_are_no_change() -> None:
    for seed in range(20):
        verdict = compare(_samples(1.0, 0.01, seed=seed), _samples(1.0, 0.01, seed=seed + 100),
                          same_process=True)
        assert verdict.direction == "none", verdict.reason


def test_a_clear_slowdown_in_one_job_is_a_regression_with_an_interval() -> None:
    verdict = compare(_samples(1.0, 0.01), _samples(1.2, 0.01, seed=1), same_process=True)
    assert verdict.direction == "regression"
    assert 18 < verdict.change_pct < 22 and verdict.ci_low < verdict.change_pct < verdict.ci_high
    assert verdict.threshold_pct == 5.0


def test_throughput_metrics_flip_the_sign() -> None:
    verdict = compare(_samples(100, 0.01), _samples(50, 0.01, seed=1), higher_is_better=True,
                      same_process=True)
    assert verdict.direction == "regression" and verdict.change_pct > 0


@pytest.mark.parametrize(("base", "head", "higher_is_better", "direction"), [
    # one kernel seen as a time and as a throughput, at a 5 % threshold: the same verdict either way
    (1.0, 1.0515, False, "regression"),  # 5.15 % more time per unit of work
    (100.0, 95.1, True, "regression"),   # ... is 4.9 % less throughput
    (1.0, 1.0490, False, "none"),
    (100.0, 95.33, True, "none"),
    (100.0, 300.0, True, "improvement"),  # its signed change, -200 %, is no ratio of times
])
def test_time_and_throughput_are_compared_as_the_same_ratio(
        base: float, head: float, higher_is_better: bool, direction: str) -> None:
    verdict = compare(_samples(base, 0.0005), _samples(head, 0.0005, seed=1), higher_is_better=higher_is_better,
                      same_process=True)
    assert verdict.threshold_pct == 5.0
    assert verdict.direction == direction, verdict.reason


def test_separate_runs_need_history_before_small_changes_count() -> None:
    base, head = _samples(1.0, 0.01), _samples(1.3, 0.01, seed=1)
    unknown = compare(base, head)
    assert unknown.direction == "none"
    assert unknown.threshold_pct == UNKNOWN_RUN_NOISE_FLOOR * 100
    quiet = run_to_run_noise([1.0, 1.01, 0.99, 1.0, 1.005, 0.995])
    assert quiet is not None and quiet < 0.02
    assert compare(base, head, run_noise=quiet).direction == "regression"
    assert compare(_samples(1.0, 0.01), _samples(2.0, 0.01, seed=1)).direction == "regression"
    assert compare(_samples(1.0, 0.01), _samples(0.2, 0.01, seed=1)).direction == "improvement"


def test_run_to_run_noise_ignores_a_real_step() -> None:
    noisy = run_to_run_noise([1.0, 1.02, 0.98, 1.01, 2.0, 2.02, 1.98, 2.01])
    assert noisy is not None and noisy < 0.05
    assert run_to_run_noise([1.0, 1.1]) is None


def test_too_few_samples_is_never_a_verdict() -> None:
    assert compare([1.0, 1.0], [5.0, 5.0]).direction == "none"


def test_correctness_and_fdr() -> None:
    assert new_failures({"a": "passed", "b": "failed"}, {"a": "failed", "b": "failed"}) == ["a"]
    assert new_failures(None, {"a": "error", "b": "passed"}) == ["a"]
    assert fixed({"a": "failed"}, {"a": "passed"}) == ["a"]
    adjusted = adjust([0.01, 0.04, 0.03, 0.5])
    assert all(q >= p for p, q in zip([0.01, 0.04, 0.03, 0.5], adjusted))
    assert adjust([]) == []


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 10, 101])
def test_bootstrap_medians_have_the_distribution_of_medians_of_real_resamples(n: int) -> None:
    from roofwatch.service.analysis.compare import bootstrap_medians

    values = np.round(np.random.default_rng(n).lognormal(0.0, 0.3, n), 2)  # ties included
    drawn = bootstrap_medians(values, 40_000, np.random.default_rng(1))
    resampled = np.median(np.random.default_rng(2).choice(values, (40_000, n)), axis=1)
    # Values of the sample (or means of two), with the same probabilities to within sampling error.
    assert set(np.unique(drawn)) <= set(np.unique(resampled)) | {(a + b) / 2 for a in values for b in values}
    for q in (0.1, 0.5, 0.9):
        level = np.quantile(resampled, q)
        assert abs(np.mean(drawn <= level) - np.mean(resampled <= level)) < 0.015


def test_a_comparison_of_200k_samples_costs_what_one_of_1000_does() -> None:
    from roofwatch.common.sampling import SAMPLE_LIMIT, reservoir

    rng = np.random.default_rng(5)
    base, head = rng.lognormal(0, 0.05, 200_000), 1.3 * rng.lognormal(0, 0.05, 200_000)
    verdict = compare(base.tolist(), head.tolist(), same_process=True)
    assert verdict.direction == "regression" and 28 < verdict.change_pct < 32
    kept = reservoir(base, seed=3)
    assert len(kept) == SAMPLE_LIMIT and kept == reservoir(base, seed=3)
    position = {value: i for i, value in enumerate(base.tolist())}
    at = [position[value] for value in kept]  # drawn from the samples, in their original order
    assert at == sorted(at)
