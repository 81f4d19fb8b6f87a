"""What a downsampled chart keeps: its ends, every marked change, every outlier, and its shape."""

from __future__ import annotations

import numpy as np

from roofwatch.dashboard.downsampling import downsample, lttb, outliers


def _history(count: int, step_at: int, slow: list[int]) -> list[float | None]:
    rng = np.random.default_rng(0)
    values = np.exp(rng.normal(0.0, 0.01, count)) * np.where(np.arange(count) >= step_at, 1.2, 1.0)
    values[slow] *= 1.5  # runs on a busy host: far off their neighbours
    return [float(v) for v in values]


def test_twenty_thousand_points_become_at_most_the_budget_keeping_changes_and_outliers() -> None:
    slow = [777, 3_001, 3_002, 15_555]
    values = _history(20_000, 12_345, slow)
    values[9_000] = None  # no value: not drawn
    shown = downsample(values, keep=[12_345, 19_000], max_points=1_500)
    assert 1_400 <= len(shown) <= 1_500 and shown == sorted(set(shown))
    assert {0, 19_999, 12_345, 19_000, *slow} <= set(shown)
    assert 9_000 not in shown
    # The step survives: what is drawn before it sits ~20 % below what is drawn after it.
    before = [values[i] for i in shown if i < 12_345 and i not in slow]
    after = [values[i] for i in shown if i >= 12_345 and i not in slow]
    assert np.median(after) / np.median(before) > 1.15  # type: ignore[type-var]


def test_short_series_and_anchors_beyond_the_budget_are_drawn_whole() -> None:
    assert downsample([1.0, None, 3.0], keep=[1], max_points=10) == [0, 1, 2]
    values: list[float | None] = [float(i % 5) for i in range(100)]
    assert downsample(values, keep=range(0, 100, 2), max_points=20) == list(range(0, 100, 2)) + [99]


def test_lttb_takes_the_peak_of_each_bucket() -> None:
    y = np.zeros(101)
    y[37] = 5.0  # a single spike in the first half
    x = np.arange(101.0)
    chosen = lttb(x, y, 0, 100, 2)
    assert len(chosen) == 2 and 37 in chosen


def test_outliers_are_judged_against_their_neighbours_not_the_whole_series() -> None:
    level = np.concatenate([np.full(500, 1.0), np.full(500, 2.0)])  # a step is not an outlier
    level = level * np.exp(np.random.default_rng(1).normal(0.0, 0.005, 1_000))
    level[250] *= 1.3
    assert outliers(level, most=10) == [250]
    assert outliers(np.full(50, 3.0), most=10) == []
