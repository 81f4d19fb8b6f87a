"""Change points: steps found and placed, noise of every realistic kind left alone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.changepoints.generator import FAMILIES, generate_cell
from bench.changepoints.score import aggregate
from roofwatch.service.analysis.changepoints import despike, detect, robust_sigma


def _steps(levels: list[tuple[int, float]], noise: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = np.concatenate([np.full(n, level) for n, level in levels])
    return values * np.exp(rng.normal(0.0, noise, len(values)))


def test_a_step_is_found_where_it_is_with_its_size() -> None:
    (cp,) = detect(_steps([(60, 1.0), (60, 1.1)], 0.01))
    assert cp.index == 60
    assert 8 < cp.change_pct < 12 and cp.ci_low < cp.change_pct < cp.ci_high and cp.p_value < 1e-6
    assert cp.before == pytest.approx(1.0, rel=0.02) and cp.after == pytest.approx(1.1, rel=0.02)


def test_speedups_are_negative_and_several_steps_are_all_found() -> None:
    found = detect(_steps([(40, 1.0), (40, 0.8), (40, 1.2)], 0.01))
    assert [cp.index for cp in found] == [40, 80]
    assert found[0].change_pct < 0 < found[1].change_pct


def test_pure_noise_drift_and_outliers_are_not_changes() -> None:
    rng = np.random.default_rng(3)
    noise = np.exp(rng.standard_t(3, 300) * 0.01)
    drift = np.linspace(1.0, 1.04, 300)
    spikes = np.ones(300)
    spikes[[50, 51, 52, 200]] = 1.4
    assert detect(noise * drift * spikes) == []


def _two_modes(n: int, gap: float, p_upper: float, seed: int) -> np.ndarray:
    """An autotuner landing on one of two configurations ``gap`` apart, with 0.3 % jitter."""
    rng = np.random.default_rng(seed)
    return np.where(rng.random(n) < p_upper, 1.0 + gap, 1.0) * np.exp(rng.normal(0.0, 0.003, n))


@pytest.mark.parametrize("seed", range(5))
def test_two_autotuner_modes_alone_are_not_changes(seed: int) -> None:
    # Near p = 0.5 the median of a window flips between the modes; that flip is not a step.
    assert detect(_two_modes(200, 0.05, 0.45, seed)) == []


@pytest.mark.parametrize("seed", range(5))
def test_a_step_smaller_than_the_mode_gap_is_found(seed: int) -> None:
    values = _two_modes(200, 0.05, 0.35, seed)
    values[100:] *= 1.025
    (cp,) = detect(values)
    assert abs(cp.index - 100) <= 3 and 1.5 < cp.change_pct < 3.5


def test_missing_values_keep_input_row_numbers() -> None:
    values = list(_steps([(40, 1.0), (40, 1.5)], 0.01))
    values[10] = float("nan")
    values[20] = 0.0
    (cp,) = detect(values)
    assert cp.index == 40


def test_short_or_empty_series_have_no_change_points() -> None:
    assert detect([]) == [] and detect([1.0, 2.0, 3.0]) == []


def test_despike_removes_short_episodes_and_keeps_steps() -> None:
    x = np.log(_steps([(30, 1.0), (30, 1.2)], 0.002))
    x[10:13] += 0.3
    cleaned = despike(x, robust_sigma(x))
    assert np.all(np.abs(cleaned[10:13] - np.log(1.0)) < 0.02)
    assert np.all(cleaned[35:] > np.log(1.15))


def test_generator_families_meet_the_goal_on_a_small_sample() -> None:
    """A fast slice of `python -m bench.changepoints.run` (docs/analysis.md has the full table)."""
    results = []
    for family in FAMILIES:
        for noise in (0.003, 0.03):
            results += [([c.index for c in detect(s.values)], s.changes) for s in generate_cell(family, noise, 6, 11)]
    score = aggregate(results)
    assert score.f1 >= 0.85 and score.false_alarms_per_clean <= 0.10, score


def test_tigerbeetle_level_shifts_are_found(shared_corpus: Path) -> None:
    """Otava's real series: the level drop at 15/16 and the jump at 71 (its old-default answers)."""
    data = json.loads((shared_corpus / "cpd-timeseries" / "otava" / "tigerbeetle.json").read_text())
    found = [cp.index for cp in detect(data["series"])]
    for expected in (15, 71):
        assert any(abs(index - expected) <= 2 for index in found), found
