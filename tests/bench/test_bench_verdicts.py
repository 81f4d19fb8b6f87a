"""The A/B benchmark runs in CI: ``bench.verdicts`` (simulation); ``bench.gpu_ab_check`` has its own tests."""

from __future__ import annotations

from pathlib import Path

from bench import verdicts

ROOT = Path(__file__).resolve().parents[2]


def test_simulated_aa_raises_no_false_regression_and_planted_changes_are_found() -> None:
    # A small cell of the benchmark: seeded, so the numbers are the same on every run.
    row = verdicts.measure("bimodal", 0.10, comparisons=20, benchmarks=10, max_rounds=10, seed=1)
    assert row.false_regressions == 0.0 and row.false_improvements == 0.0
    assert row.detected >= 0.8 and 0 < row.mde_pct < 100


def test_each_noise_kind_has_the_size_asked_for() -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    normal = verdicts.noise("normal", 0.05)(rng, 20_000)
    heavy = verdicts.noise("heavy", 0.05)(rng, 20_000)
    bimodal = verdicts.noise("bimodal", 0.05)(rng, 20_000)
    assert abs(normal.std() - 0.05) < 0.003 and abs(heavy.std() - 0.05) < 0.01
    assert abs((bimodal > 0.05).mean() - verdicts.SLOW_SHARE) < 0.02
