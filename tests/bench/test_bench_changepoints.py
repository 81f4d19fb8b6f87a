"""Checks of the change-point benchmark harness (bench/changepoints): scoring, generator, real-series loaders."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.changepoints import (
    acceptance,
    ceiling,
    confirming,
    fitted,
    generator,
    histories,
    host,
    likelihood,
    peers,
    reading,
    real,
    run,
    scanning,
)
from bench.changepoints.score import aggregate, found, match

# --- score ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("detected", "truth", "expected"), [
    ([], [], (0, 0, 0)),
    ([50], [], (0, 1, 0)),
    ([], [50], (0, 0, 1)),
    ([53], [50], (1, 0, 0)),
    ([54], [50], (0, 1, 1)),
    ([49, 50, 51], [50], (1, 2, 0)),  # one-to-one: a triple report earns one hit
    ([48], [47, 50], (1, 0, 1)),  # the closest true change takes it
    ([47, 51], [48, 50], (2, 0, 0)),  # greedy by distance still pairs both
])
def test_match(detected: list[int], truth: list[int], expected: tuple[int, int, int]) -> None:
    assert match(detected, truth, tolerance=3) == expected


def test_found_says_which_true_changes_were_paired() -> None:
    assert found([49, 50, 90], [50, 70, 88]) == [True, False, True]


def test_aggregate_is_micro_and_counts_false_alarms_on_clean_series() -> None:
    score = aggregate([([10, 40], [10, 40, 70]), ([5, 90], []), ([], [])], tolerance=3)
    assert (score.tp, score.fp, score.fn) == (2, 2, 1)
    assert score.precision == 0.5 and score.recall == pytest.approx(2 / 3)
    assert score.false_alarms_per_clean == 1.0  # two detections over two clean series


# --- generator ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("family", generator.FAMILIES)
def test_generator_respects_the_spec(family: str) -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        s = generator.generate(family, 0.03, rng)
        assert len(s.values) == 200 and np.all(s.values > 0)
        assert len(s.changes) <= 3 and s.changes == sorted(s.changes)
        assert all(c >= 10 and 200 - c >= 10 for c in s.changes)
        assert all(b - a >= 10 for a, b in zip(s.changes, s.changes[1:]))


def test_generator_is_seeded_and_draws_change_free_series() -> None:
    a = generator.generate_cell("mixed", 0.01, 300, seed=3)
    b = generator.generate_cell("mixed", 0.01, 300, seed=3)
    assert all(np.array_equal(x.values, y.values) and x.changes == y.changes for x, y in zip(a, b))
    assert 0.18 < generator.clean_fraction(a) < 0.32


def test_generator_rejects_unknown_family() -> None:
    with pytest.raises(ValueError, match="unknown family"):
        generator.generate("sinusoid", 0.01, np.random.default_rng(0))


# --- acceptance histories ----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", histories.KINDS)
def test_histories_respect_the_spec(kind: str) -> None:
    for h in histories.cell(kind, 0.03, 100, seed=7):
        assert len(h.values) == histories.COMMITS and np.all(h.values > 0)
        indexes = h.indexes
        assert len(indexes) <= 3 and indexes == sorted(indexes)
        assert all(10 <= i <= histories.COMMITS - 10 for i in indexes)
        assert all(b - a >= 10 for a, b in zip(indexes, indexes[1:]))
        for change in h.changes:
            if change.shift == "mix":
                assert h.detail == "gpu" and np.isnan(change.size)  # an autotuner's modes are too close to matter
            else:
                assert abs(change.size) in histories.STEP_SIZES


def test_histories_are_seeded_with_a_clean_quarter_and_every_drift_shape() -> None:
    a = histories.cell("drift", 0.01, 200, seed=3)
    b = histories.cell("drift", 0.01, 200, seed=3)
    assert all(np.array_equal(x.values, y.values) and x.changes == y.changes for x, y in zip(a, b))
    assert 0.18 < sum(not h.changes for h in a) / len(a) < 0.32
    assert {h.detail for h in a} == {"linear", "sinusoid", "warm-up"}


def test_histories_draw_what_they_drew_before_their_noise_model_was_recorded() -> None:
    """Recording each history's noise model moves no draw: a seed is the same histories as before it was kept.

    The changes are compared exactly; the values by sums of their logs, to a relative 10⁻¹⁰: NumPy's exp and log
    differ in the last bit between hosts with and without AVX-512, while one draw moved changes a sum by 10⁻³ or more.
    """
    digest = hashlib.sha1()
    total = squares = by_commit = 0.0
    for kind in histories.KINDS:
        for noise in histories.NOISE_LEVELS:
            for h in histories.cell(kind, noise, 20, 5):
                digest.update(repr(h.changes).encode())
                x = np.log(h.values)
                total += float(x.sum())
                squares += float(x @ x)
                by_commit += float(np.arange(len(x)) @ x)
    assert digest.hexdigest() == "5b7978f1a671fb619fe7a00db05f15241b9c427e"
    assert (total, squares, by_commit) == pytest.approx((-555604.8783485355, 5232997.093317611, -55281995.39325941),
                                                        rel=1e-10)


def _oracle(series: dict[str, histories.History]) -> acceptance.Oracle:
    return acceptance.Oracle.of(series, 3, calibration=20)


def test_acceptance_tables_score_recall_per_size_and_drift_alarms() -> None:
    series = acceptance.generate([7], per_cell=2)
    results = {(name, key): run.Outcome(list(h.indexes) if name == "perfect" else [5], 0.0)
               for key, h in series.items() for name in ("perfect", "roofwatch")}
    keys = list(series)
    perfect = acceptance.tally(keys, series, results, "perfect", 3)
    assert all(perfect.recall(label) == 1.0 for label in perfect.total)
    alarms, hit, clean = acceptance.drift_alarms(keys, series, results, "roofwatch")
    assert alarms == hit == clean > 0
    goals = acceptance.goals(series, results, 3, _oracle(series))
    met = {row[0]: row[3] for row in goals.rows}
    assert set(met.values()) == {"NO"}  # one false alarm on every history, no step found
    assert len(goals.rows) == len(acceptance.GOALS)


def test_recall_goals_are_shares_of_the_true_model_oracle_on_the_same_steps() -> None:
    series = acceptance.generate([7], per_cell=4)
    results = {("roofwatch", key): run.Outcome(list(h.indexes), 0.0) for key, h in series.items()}
    oracle = _oracle(series)
    values = acceptance.measured(series, results, 3, oracle)
    placed = oracle.placed(list(series))
    # every step found: the share is 1 / the oracle's recall, never above what the oracle leaves out
    assert values["share 2 %"] == pytest.approx(1.0 / placed.recall("2 %"))
    assert values["FA/clean"] == values["FA/clean drift"] == 0.0 and values["F1"] == 1.0
    assert all(v.placed or not v.detected for vs in oracle.verdicts.values() for v in vs)


def _history(*changes: histories.Change) -> histories.History:
    return histories.History(np.ones(60), list(changes), "bimodal", 0.01, "gpu")


def test_location_f1_leaves_out_mix_changes_and_what_was_seen_at_them() -> None:
    step, mix = histories.Change(20, "location", 0.05), histories.Change(40, "mix", float("nan"))
    series = {"a": _history(step, mix), "b": _history()}
    results = {("steps only", "a"): run.Outcome([20], 0.0), ("steps only", "b"): run.Outcome([], 0.0),
               ("beside the mix", "a"): run.Outcome([21, 42], 0.0), ("beside the mix", "b"): run.Outcome([], 0.0),
               ("far", "a"): run.Outcome([20, 50], 0.0), ("far", "b"): run.Outcome([], 0.0)}
    keys = list(series)
    assert acceptance.score(keys, series, results, "steps only", 3).f1 < 1.0  # the mix change is missed
    assert acceptance.location_score(keys, series, results, "steps only", 3).f1 == 1.0
    assert acceptance.location_score(keys, series, results, "beside the mix", 3).f1 == 1.0  # seen, not false
    far = acceptance.location_score(keys, series, results, "far", 3)
    assert (far.tp, far.fp, far.fn) == (1, 1, 0)


def test_the_oracles_f1_counts_misplaced_steps_that_pass_its_budget_on_clean_histories_and_mix_changes() -> None:
    step, mix = histories.Change(20, "location", 0.05), histories.Change(40, "mix", float("nan"))
    series = {"found": _history(step, mix), "misplaced": _history(step), "missed": _history(step),
              "clean": _history(), "clean too": _history()}

    def verdict(placed: bool, passes: bool) -> ceiling.Verdict:
        return ceiling.Verdict(step, "bimodal", 0.01, placed, placed and passes, passes)

    oracle = acceptance.Oracle({"found": [verdict(True, True)], "misplaced": [verdict(False, True)],  # no mix verdict
                                "missed": [verdict(True, False)], "clean": [], "clean too": []})
    top = oracle.f1(list(series), series)
    assert top.recall == pytest.approx(1 / 3)
    assert top.precision == pytest.approx(1 / (1 + 1 + 2 * ceiling.FALSE_ALARMS))
    assert top.f1 == pytest.approx(2 * top.precision * top.recall / (top.precision + top.recall))
    assert top.recall_every_change == pytest.approx(1 / 4)  # the mix change it never places is a miss
    assert top.f1_every_change < top.f1


def test_a_step_is_named_at_its_commit_only_when_found_there() -> None:
    big, small = histories.Change(20, "location", 0.2), histories.Change(40, "location", -0.05)
    series = {"exact": _history(big, small), "one off": _history(big), "missed": _history(big), "clean": _history()}
    results = {("roofwatch", "exact"): run.Outcome([20, 42], 0.0), ("roofwatch", "one off"): run.Outcome([21], 0.0),
               ("roofwatch", "missed"): run.Outcome([30], 0.0), ("roofwatch", "clean"): run.Outcome([5], 0.0)}
    # the 5 % step is under NAMED_FROM: not counted, placed or not
    assert acceptance.named_at_commit(list(series), series, results, "roofwatch", 3) == (1, 2)
    assert acceptance.named_at_commit(list(series), series, results, "roofwatch", 3, smallest=0.05) == (1, 3)


def test_a_step_named_off_is_confirmed_at_its_commit_by_the_search_and_costs_its_abs() -> None:
    first, second = histories.Change(50, "location", 0.2), histories.Change(120, "location", -0.02)
    mix = histories.Change(90, "mix", math.nan)
    # 50 at its commit; 122 two commits off 120; 160 and 92 near nothing a location step moved
    long = histories.History(np.ones(200), [first, mix, second], "bimodal", 0.01, "gpu")
    done = confirming.confirmed(long, [50, 122, 160, 92])
    assert (done.by_pair, done.with_search) == (1, 2)
    # one A/B per change point; then for 122 the span (118, 125], its older half (118, 121], (118, 119] and (119, 120];
    # for 160 and 92 the span alone, which shows nothing
    assert (done.abs_by_pair, done.abs_with_search) == (4, 4 + 4 + 1 + 1)
    # 46 is four commits off, beyond the search (its span alone); 47 three off, found again by five A/Bs: one step
    assert confirming.confirmed(_history(first), [46, 47, 50]) == confirming.Confirmed(1, 1, 3, 3 + 1 + 5)


def test_the_acceptance_run_prints_f1_beside_the_ceiling() -> None:
    series = acceptance.generate([7], per_cell=2)
    results = {("roofwatch", key): run.Outcome(list(h.indexes), 0.0) for key, h in series.items()}
    out = {t.title: t for t in acceptance.tables(series, ["roofwatch"], results, 3, [7], _oracle(series))}
    rows = out["F1 against the true-model ceiling"].rows
    assert rows[0][:3] == ["roofwatch", "1.000", "1.000"]  # every change found
    named = next(t for title, t in out.items() if title.startswith("Steps of 10 % or more named"))
    assert named.rows[-1][:2] == ["all", "3 %"] and named.rows[-1][2].startswith("1.000 (")  # each at its commit
    confirmed = next(t for title, t in out.items() if title.startswith("Steps confirmed at their own commit"))
    found, by_pair, searched = confirmed.rows[-1][2:5]
    assert confirmed.rows[-1][:2] == ["all", "roofwatch"] and found == by_pair == searched and int(found) > 0
    assert confirmed.rows[-1][5] == "1.00 → 1.00"  # each at its commit: no search
    assert rows[-1][0] == "true model, detecting" and 0.0 < float(rows[-1][1]) <= float(rows[-1][2]) <= 1.0
    drifting = out["False alarms per clean drifting history, by drift shape × noise level"]
    assert [row[:2] for row in drifting.rows] == [[shape, f"{noise * 100:g} %"] for shape in histories.DRIFT_SHAPES
                                                  for noise in histories.NOISE_LEVELS]


def test_drifting_false_alarms_are_counted_per_shape_and_noise_level() -> None:
    series = acceptance.generate([7], per_cell=4)  # draws clean linear histories at 1 % and warm-ups at 3 %
    # one detection on every clean linear history at 1 % noise, two on every clean warm-up at 3 %, none elsewhere
    spent = {("linear", 0.01): [50], ("warm-up", 0.03): [40, 120]}
    results = {("roofwatch", key): run.Outcome(list(h.indexes) or spent.get((h.detail, h.noise), []), 0.0)
               for key, h in series.items()}
    table = acceptance.drift_alarm_table(list(series), series, results, ["roofwatch"])
    cells = {(row[0], row[1]): row[2] for row in table.rows}
    for shape in histories.DRIFT_SHAPES:
        for noise in histories.NOISE_LEVELS:
            clean = sum(h.detail == shape and h.noise == noise and not h.changes for h in series.values())
            alarms = len(spent.get((shape, noise), [])) * clean
            assert cells[(shape, f"{noise * 100:g} %")].endswith(f"({alarms}/{clean})")
    assert cells[("linear", "1 %")].startswith("1.000") and cells[("warm-up", "3 %")].startswith("2.000")


def test_misses_list_every_unfound_step_with_the_oracles_verdict_and_the_nearest_detection(tmp_path: Path) -> None:
    series = acceptance.generate([7], per_cell=2)
    oracle = _oracle(series)
    nothing = {("roofwatch", key): run.Outcome([5], 0.0) for key in series}
    rows = acceptance.misses(series, nothing, 3, oracle)
    steps = [(key, c.index) for key, h in series.items() for c in h.changes if c.shift == "location" and c.index > 8]
    assert {(m.history, m.index) for m in rows} == set(steps)
    assert all(m.nearest_detection == 5 - m.index for m in rows)
    placed = [m.true_model_placed for m in rows]
    assert placed == sorted(placed, reverse=True)  # what the oracle places first
    perfect = {("roofwatch", key): run.Outcome(list(h.indexes), 0.0) for key, h in series.items()}
    assert acceptance.misses(series, perfect, 3, oracle) == []
    path = tmp_path / "misses.csv"
    acceptance.write_misses(str(path), rows)
    with path.open() as f:
        read = list(csv.DictReader(f))
    assert [(r["history"], int(r["index"])) for r in read] == [(m.history, m.index) for m in rows]


def test_misses_need_roofwatch_among_the_detectors() -> None:
    with pytest.raises(SystemExit):
        acceptance.parse_args(["--detectors", "zscore", "--misses", "misses.csv"])
    assert acceptance.parse_args(["--detectors", "roofwatch", "--misses", "misses.csv"]).misses == "misses.csv"


@pytest.mark.parametrize(("text", "seeds"), [("300,301,302", [300, 301, 302]), ("300-303", [300, 301, 302, 303]),
                                             ("0-1,7", [0, 1, 7])])
def test_seeds_are_a_list_or_a_range(text: str, seeds: list[int]) -> None:
    assert acceptance.parse_seeds(text) == seeds


# --- the true-model oracle ----------------------------------------------------------------------------

MODELS = {
    "normal": histories.NoiseModel("normal", 0.01),
    "t, df 3": histories.NoiseModel("t", 0.01, df=3.0),
    "slow tail only": histories.NoiseModel("half-t", 0.01, df=2.5),
    "busy neighbour, fast outliers": histories.NoiseModel(
        "normal", 0.01, slow_share=np.full(1, 0.06), slow_band=(0.1, 0.5), fast_share=0.02, fast_band=(0.05, 0.2)),
    "autotuner 4 % apart": histories.NoiseModel("normal", 0.01, slow_share=np.full(1, 0.3), slow_band=(0.04, 0.04)),
    "GPU slow band": histories.NoiseModel("normal", 0.003, slow_share=np.full(1, 0.4), slow_band=(0.3, 0.55)),
}


@pytest.mark.parametrize("name", MODELS)
def test_each_noise_density_integrates_to_one(name: str) -> None:
    grid = np.linspace(-1.0, 1.0, 400_001)
    density = np.exp(likelihood.log_density(MODELS[name], grid, np.zeros(len(grid), dtype=int)))
    assert np.trapezoid(density, grid) == pytest.approx(1.0, abs=2e-3)


@pytest.mark.parametrize(("sigma", "low", "high", "at"), [
    (0.01, 0.1, 0.5, 0.2), (0.01, 0.1, 0.5, 0.05), (0.003, 0.3, 0.55, 0.40), (0.01, -0.2, -0.05, -0.1),
    (0.01, 0.1, 0.5, -0.3),  # far below the band: the mirrored tails keep its log finite
])
def test_a_slowdown_band_convolved_with_jitter_is_the_closed_form(sigma: float, low: float, high: float,
                                                                    at: float) -> None:
    u = np.linspace(low, high, 200_001)
    numeric = np.mean(np.exp(-0.5 * ((at - np.log1p(u)) / sigma) ** 2) / (sigma * np.sqrt(2 * np.pi)))
    closed = float(np.exp(likelihood._log_band(np.array([at]), sigma, low, high))[0])
    assert closed == pytest.approx(numeric, rel=1e-3, abs=1e-300)


# --- the reading scanner: told nothing, it reads the noise itself --------------------------------------

def _read(kind: str, seed: int) -> np.ndarray:
    """Log-values of 200 commits with a +5 % step at 100, under noise of ``kind``."""
    rng = np.random.default_rng(seed)
    n = 200
    x = np.where(np.arange(n) >= 100, math.log(1.05), 0.0)
    if kind == "normal":
        return x + rng.normal(0.0, 0.01, n)
    if kind == "episodes":  # a busy neighbour: two runs of slow commits, 30 % slower
        busy = np.isin(np.arange(n), [30, 31, 32, 120, 121, 160])
        return x + rng.normal(0.0, 0.003, n) + np.where(busy, math.log(1.3), 0.0)
    if kind == "bimodal":  # an autotuner's two configurations, 8 % apart, the slow one in 40 % of the runs
        return x + rng.normal(0.0, 0.005, n) + np.where(rng.random(n) < 0.4, math.log(1.08), 0.0)
    if kind == "t":  # two-sided Student-t jitter of 3 degrees of freedom
        return x + 0.01 * rng.standard_t(3.0, n)
    if kind == "half-t":  # a floor and a slow delay
        return x + 0.01 * np.abs(rng.standard_t(3.0, n))
    return 0.04 * np.arange(n) / n + rng.normal(0.0, 0.003, n)  # drift: 4 % over the series, no step


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_reading_scanner_reads_each_density_from_the_series(seed: int) -> None:
    model, name = reading.read(_read("normal", seed))
    assert name == "normal" and model.sigma == pytest.approx(0.01, rel=0.15)
    model, name = reading.read(_read("episodes", seed))
    assert name == "episodes" and model.slow_band[0] <= 0.3 <= model.slow_band[1]
    assert model.slow_share[0] == pytest.approx(6 / 200, abs=0.01)
    model, name = reading.read(_read("bimodal", seed))
    assert name == "bimodal" and model.slow_band[0] <= 0.08 <= model.slow_band[1]
    assert model.slow_share[0] == pytest.approx(0.4, abs=0.1)
    model, name = reading.read(_read("drift", seed))
    assert name == "normal+drift" and np.ptp(model.trend) == pytest.approx(0.04, abs=0.005)
    model, name = reading.read(_read("t", seed))
    assert name == "t" and model.df <= 6.0
    model, name = reading.read(_read("half-t", seed))
    assert name == "half-t" and model.sigma == pytest.approx(0.01, rel=0.3)


def test_a_half_t_is_read_from_the_values_above_the_floor() -> None:
    above = 0.01 * np.abs(np.random.default_rng(4).standard_t(3.0, 4000))
    _ll, df, scale = reading._likeliest_t(above, float(np.median(above)) * reading.HALF_SCALES)
    assert df in (2.5, 3.0, 4.0) and scale == pytest.approx(0.01, rel=0.15)


@pytest.mark.parametrize(("reading_", "penalty"), [
    ("normal", 6.0),
    ("episodes", 9.0),
    ("bimodal+drift", 9.0),  # seen on too few change-free histories: the largest penalty of the readings that were
    ("t+drift", 9.0),  # never seen at all: the same
])
def test_a_reading_seen_too_rarely_takes_the_largest_penalty(reading_: str, penalty: float) -> None:
    table = {"normal": 6.0, "episodes": 9.0, "bimodal+drift": 3.5}
    counts = {"normal": 500, "episodes": reading.MIN_CALIBRATION, "bimodal+drift": reading.MIN_CALIBRATION - 1}
    assert reading.penalty(table, counts, reading_) == penalty


def test_the_acceptance_run_scores_the_reading_scanner_beside_the_goals() -> None:
    series = acceptance.generate([7], per_cell=2)
    results = {("roofwatch", key): run.Outcome(list(h.indexes), 0.0) for key, h in series.items()}
    read, names = acceptance.read_scan(series, [1.0, 1.5], 2, calibration=12)
    assert names == ["reading", "reading ×1.5"] and set(read) == {(n, k) for n in names for k in series}
    assert all(len(read[("reading ×1.5", k)].detections) <= len(read[("reading", k)].detections) for k in series)
    big = [(k, c.index) for k, h in series.items() for c in h.changes if abs(c.size) >= 0.1 and h.noise == 0.003]
    assert big and all(any(abs(d - i) <= 3 for d in read[("reading", k)].detections) for k, i in big)
    out = {t.title: t for t in acceptance.tables(series, ["roofwatch", *names], results | read, 3, [7],
                                                 _oracle(series), names)}
    assert out["roofwatch against its goals"].columns[-2:] == names
    assert any("reading.py" in note for note in out["roofwatch against its goals"].notes)
    assert acceptance.parse_args([]).reading == [] and acceptance.parse_args(["--reading", "1.25"]).reading == [1.25]


@pytest.mark.parametrize(("values", "split"), [
    ([0.0, 0.0, 0.0, 1.0, 1.0], 3),
    ([0.0, 0.0, 0.0, 0.0, 0.9, 1.1, 1.0, 1.0], 4),
    ([1.0, 1.1, 0.9, 0.0, 0.1, -0.1, 0.0], 3),
])
def test_in_gaussian_noise_the_likeliest_split_is_the_least_squares_one(values: list[float], split: int) -> None:
    x = np.array(values)
    model = histories.NoiseModel("normal", 0.1)
    assert likelihood.likeliest_split(x, model, 0, len(x)).index == ceiling.least_squares_split(x) == split


def test_a_slow_tail_only_level_is_placed_by_its_lowest_values() -> None:
    """Slow-tail noise cannot fall below its level: the lowest values place a step that the mean barely shows."""
    rng = np.random.default_rng(3)
    x = np.r_[np.zeros(60), np.full(60, 0.01)] + 0.01 * np.abs(rng.standard_t(2.5, 120))
    split = likelihood.likeliest_split(x, histories.NoiseModel("half-t", 0.01, df=2.5), 0, 120)
    assert abs(split.index - 60) <= 3 and split.gain > 20


def test_a_known_drift_is_taken_out_before_the_step_is_placed() -> None:
    t = np.arange(120)
    trend = 0.05 * np.sin(2 * np.pi * t / 80)
    x = trend + np.where(t >= 70, 0.01, 0.0) + np.random.default_rng(5).normal(0, 0.002, 120)
    told = likelihood.likeliest_split(x, histories.NoiseModel("normal", 0.002, trend=trend), 0, 120)
    assert told.index == 70 and ceiling.least_squares_split(x) != 70


def test_the_detecting_oracle_spends_its_false_alarms_on_clean_histories() -> None:
    thresholds = ceiling.detection_thresholds(1, 40)
    assert {(k, n) for k, _d, n in thresholds} == {(k, n) for k in histories.KINDS for n in histories.NOISE_LEVELS}
    # a clean gaussian history's largest gain is about half a chi-square's maximum over splits: a few nats
    assert 2.0 < thresholds[("gaussian", "normal", 0.01)] < 8.0


# --- the fitted scanner: the scanning oracle fitting a drift's curve -----------------------------------

def test_segment_neighbourhood_gains_what_the_scanning_oracle_gains_in_gaussian_noise() -> None:
    x = _steps([(40, 0.0), (30, 0.02), (50, 0.005)], 0.01, 1)
    told = scanning.gains_by_count(scanning.stretch_likelihoods(x, histories.NoiseModel("normal", 0.01)), 3)
    found = fitted.best_segmentations(fitted.segment_likelihoods(x, 0.01), 3)
    likelihoods = [fitted.joint_fit(x, fitted.columns("none", 0.0, len(x)), s, 0.01)[0] for s in found]
    assert np.array(likelihoods) - likelihoods[0] == pytest.approx(told, abs=1e-6)
    assert found[0] == [] and found[1] == [40]  # the +2 σ step alone, then the bump's two sides within a commit
    assert len(found[2]) == 2 and all(abs(a - b) <= 1 for a, b in zip(found[2], [40, 70]))


def test_a_drift_fitted_as_a_curve_is_no_staircase() -> None:
    """A clean line or sinusoid of many noise deviations: stairs without a curve, next to nothing with one."""
    t = np.arange(200)
    rng = np.random.default_rng(1)
    for x in (0.04 * t / 200 + rng.normal(0.0, 0.003, 200),  # 13 σ over the series
              0.02 * np.sin(2 * np.pi * t / 90 + 1) + rng.normal(0.0, 0.003, 200)):  # a period between the grid's
        assert len(scanning.partition(fitted.segment_likelihoods(x, 0.003), 10.0)) >= 3
        assert fitted.gains(fitted.fits(x, 0.003))[1] < 10.0


def test_a_step_on_a_fitted_sinusoid_is_placed_at_its_commit() -> None:
    t = np.arange(200)
    x = 0.02 * np.sin(2 * np.pi * t / 90 + 1) + np.where(t >= 120, -0.01, 0.0)  # -3.3 σ on a ±6.7 σ wave
    x = x + np.random.default_rng(1).normal(0.0, 0.003, 200)
    fits = fitted.fits(x, 0.003)
    assert len(fits[1][1]) == 1 and abs(fits[1][1][0] - 120) <= 1 and fitted.gains(fits)[1] > 100.0
    assert fitted.gains(fits)[2] - fitted.gains(fits)[1] < 10.0  # a second change gains what noise gives


def test_the_acceptance_run_scores_the_fitted_scanner_beside_the_goals() -> None:
    series = acceptance.generate([7], per_cell=1)
    results = {("roofwatch", key): run.Outcome(list(h.indexes), 0.0) for key, h in series.items()}
    rows, names = acceptance.fitted_scan(series, [1.0, 1.5], 2, calibration=8)
    told = scanning.penalties(2, 8)
    for key, h in series.items():  # off drifting histories, the scanning oracle's own answer
        if h.kind != "drift":
            assert rows[("fitted", key)].detections == scanning.detect(h, [told[(h.kind, h.detail, h.noise)]])[0]
    assert names == ["fitted", "fitted ×1.5"] and set(rows) == {(n, k) for n in names for k in series}
    assert all(len(rows[("fitted ×1.5", k)].detections) <= len(rows[("fitted", k)].detections) for k in series)
    big = [(k, c.index) for k, h in series.items() for c in h.changes  # steps of 3 noise deviations or more
           if h.kind == "drift" and abs(c.size) >= 3 * h.noise]
    assert big and all(any(abs(d - i) <= 3 for d in rows[("fitted", k)].detections) for k, i in big)
    out = {t.title: t for t in acceptance.tables(series, ["roofwatch", *names], results | rows, 3, [7],
                                                 _oracle(series), names)}
    assert out["roofwatch against its goals"].columns[-2:] == names
    assert any("fitted.py" in note for note in out["roofwatch against its goals"].notes)
    assert acceptance.parse_args([]).fitted == [] and acceptance.parse_args(["--fitted", "1.25"]).fitted == [1.25]


# --- the scanning oracle: told the noise, not the steps ----------------------------------------------

def _steps(levels: list[tuple[int, float]], sigma: float, seed: int) -> np.ndarray:
    """Log-values: ``(length, level)`` stretches one after another, gaussian noise of ``sigma``."""
    x = np.concatenate([np.full(length, level) for length, level in levels])
    return x + np.random.default_rng(seed).normal(0.0, sigma, len(x))


def test_optimal_partitioning_finds_each_step_and_pays_a_penalty_per_change() -> None:
    model = histories.NoiseModel("normal", 0.01)
    x = _steps([(40, 0.0), (30, 0.1), (50, 0.03)], 0.01, 1)  # +10 σ, then -7 σ (a bump no single split shows whole)
    likelihoods = scanning.stretch_likelihoods(x, model)
    assert scanning.partition(likelihoods, 10.0) == [40, 70]
    assert scanning.partition(likelihoods, 1e6) == []  # no gain pays so high a penalty
    every = scanning.partition(likelihoods, 0.0)  # free changes: as many as segments of MIN_SIDE allow, no fewer
    assert len(every) > 10 and min(np.diff([0, *every, len(x)])) >= scanning.MIN_SIDE


def test_the_best_single_change_gains_what_the_likeliest_split_gains() -> None:
    for model, x in [(histories.NoiseModel("normal", 0.01), _steps([(30, 0.0), (30, 0.02)], 0.01, 2)),
                     (histories.NoiseModel("t", 0.01, df=3.0), _steps([(25, 0.0), (35, -0.015)], 0.01, 3))]:
        gains = scanning.gains_by_count(scanning.stretch_likelihoods(x, model), 3)
        split = likelihood.likeliest_split(x, model, 0, len(x), scanning.MIN_SIDE)
        assert gains[0] == 0.0 and gains[1] == pytest.approx(split.gain, abs=1e-6)
        assert np.all(np.diff(gains) >= -1e-9)  # another change never lowers the best likelihood


@pytest.mark.parametrize(("gains", "penalty", "changes"), [
    ([0.0, 5.0, 12.0, 13.0, 13.5], 4.0, 2),  # 0, 1, 4, 1, -2.5
    ([0.0, 5.0, 12.0, 13.0, 13.5], 6.5, 0),  # the pair's 12 is under 13: nothing pays
    ([0.0, 5.0, 12.0, 13.0, 13.5], 0.1, 4),
    ([0.0, 9.0, 10.0, -np.inf, -np.inf], 8.0, 1),  # no segmentation with three changes: never chosen
])
def test_the_count_of_changes_at_a_penalty(gains: list[float], penalty: float, changes: int) -> None:
    assert scanning.changes_at(np.array(gains), penalty) == changes


def test_the_penalty_is_the_smallest_that_spends_the_false_alarm_budget() -> None:
    # ten change-free histories: one gains 8 nats from a change, the rest 1. Below 8 every tenth history has a
    # change (0.1 per history, over a budget of 0.05); from 8 on, none has
    gains = np.array([[0.0, 8.0, 8.5], *[[0.0, 1.0, 1.5]] * 9])
    assert scanning.calibrate(gains, 0.05) == pytest.approx(8.0, abs=2 * scanning.PENALTY_TOLERANCE)
    assert scanning.calibrate(gains, 0.1) == pytest.approx(1.0, abs=2 * scanning.PENALTY_TOLERANCE)
    assert scanning.changes_at(gains, scanning.calibrate(gains, 0.05)).mean() <= 0.05


def test_the_acceptance_run_scores_the_scanning_oracle_as_a_detector_beside_the_goals() -> None:
    series = acceptance.generate([7], per_cell=2)
    results = {("roofwatch", key): run.Outcome(list(h.indexes), 0.0) for key, h in series.items()}
    scanned, names = acceptance.scan(series, [1.0, 1.5], 2, calibration=12)
    assert names == ["scanning", "scanning ×1.5"] and set(scanned) == {(n, k) for n in names for k in series}
    # a stricter penalty never reports more changes
    assert all(len(scanned[("scanning ×1.5", k)].detections) <= len(scanned[("scanning", k)].detections)
               for k in series)
    big = [(k, c.index) for k, h in series.items() for c in h.changes if abs(c.size) >= 0.2 and h.noise == 0.003]
    assert big and all(any(abs(d - i) <= 3 for d in scanned[("scanning", k)].detections) for k, i in big)
    out = {t.title: t for t in acceptance.tables(series, ["roofwatch", *names], results | scanned, 3, [7],
                                                 _oracle(series), names)}
    goals = out["roofwatch against its goals"]
    assert goals.columns[-2:] == names and all(len(row) == len(goals.columns) for row in goals.rows)
    assert acceptance.parse_args(["--scanning", "none"]).scanning == []
    assert acceptance.parse_args(["--scanning", "1,1.5"]).scanning == [1.0, 1.5]
    with pytest.raises(SystemExit):
        acceptance.parse_args(["--scanning", "0"])


@pytest.mark.parametrize(("values", "split"), [
    ([0.0, 0.0, 0.0, 1.0, 1.0], 3),
    ([1.0, 1.0, 0.0, 0.0, 0.0, 0.0], 2),
    ([0.0, 5.0], 1),
    ([0.0, 0.0, 0.0, 0.0, 0.9, 1.1, 1.0, 1.0], 4),
])
def test_least_squares_split(values: list[float], split: int) -> None:
    assert ceiling.least_squares_split(np.array(values)) == split


def test_oracle_places_steps_between_their_true_neighbours_and_skips_mix_changes() -> None:
    level = np.r_[np.full(30, 1.0), np.full(30, 1.5), np.full(30, 1.2)]
    wiggle = 1.0 + 0.001 * np.sin(np.arange(90))
    changes = [histories.Change(30, "location", 0.5), histories.Change(60, "location", -0.2),
               histories.Change(75, "mix", float("nan"))]
    history = histories.History(level * wiggle, changes, "gaussian", 0.001, "normal")
    assert ceiling.oracle_found(history, 3) == [True, True, None]
    # told the wrong neighbours, the first step is still placed; a step that is not there is not
    moved = histories.History(level * wiggle, [histories.Change(45, "location", 0.0)], "gaussian", 0.001, "normal")
    assert ceiling.oracle_found(moved, 3) == [False]


# --- peers that need no optional library --------------------------------------------------------------

def test_zscore_reports_a_step_once() -> None:
    x = np.r_[np.full(60, 1.0), np.full(60, 2.0)] + np.random.default_rng(0).normal(0, 0.01, 120)
    assert peers.zscore(x) == [60]


def test_robust_sigma_ignores_a_step() -> None:
    x = np.r_[np.zeros(500), np.full(500, 10.0)] + np.random.default_rng(0).normal(0, 1.0, 1000)
    assert peers.robust_sigma(x) == pytest.approx(1.0, rel=0.1)


# --- real series (skipped without the shared corpus) -------------------------------------------------

needs_corpus = pytest.mark.skipif(not real.corpus_dir().is_dir(), reason="shared corpus not present")


@needs_corpus
def test_tcpd_f1_matches_tcpdbench_test_vectors() -> None:
    vectors = json.loads((real.corpus_dir() / "tcpd/metric_test_vectors.json").read_text())
    f_measure, _source = real.tcpd_f_measure()
    for case in (c for c in vectors["doctests"] if c["fn"] == "f_measure"):
        assert f_measure(case["annotations"], case["predictions"]) == pytest.approx(case["expected"])
    nile = vectors["published_nile_examples"]
    for case in nile["cases"]:
        assert f_measure(nile["annotations"], case["cplocations"]) == pytest.approx(case["f1"])
    series, skipped = real.tcpd_series()
    assert skipped == ["run_log"]
    for s in series:
        expected = vectors["zero_baseline"][s.name]["f1_reference_impl"]
        assert real.tcpd_f1_fallback(s.annotations, []) == pytest.approx(expected)


def test_tcpdbench_metrics_is_imported_from_the_corpus_when_present(tmp_path: Path) -> None:
    metrics = tmp_path / real.TCPD_METRICS
    metrics.parent.mkdir(parents=True)
    metrics.write_text("def f_measure(annotations, predictions, margin=5, alpha=0.5):\n    return 0.25\n")
    f_measure, source = real.tcpd_f_measure(tmp_path)
    assert f_measure({"1": []}, []) == 0.25 and "TCPDBench metrics.py" in source
    assert real.tcpd_f_measure(tmp_path / "elsewhere")[0] is real.tcpd_f1_fallback


@needs_corpus
def test_real_truth_indexes() -> None:
    talos = {s.name: s.truth for s in real.talos_series()}
    assert talos["runs1"] == [111] and talos["runs5"] == [] and talos["tp5rss"] == [995, 1167, 1178]
    assert real.tigerbeetle_series().truth == [15, 71]


def test_forward_fill_keeps_indexes() -> None:
    assert real.forward_fill([None, 1.0, None, 3.0]).tolist() == [1.0, 1.0, 1.0, 3.0]


@needs_corpus
def test_otava_adapter_reproduces_otavas_own_tests() -> None:
    pytest.importorskip("otava.analysis")
    data = json.loads((real.corpus_dir() / real.TIGERBEETLE).read_text())
    for case in data["cases"]:
        p = case["params"]
        got = peers.otava(np.array(data["series"], float), p["window_len"], p["max_pvalue"], p["min_magnitude"])
        assert got == case["expected_change_point_indexes"], case["test"]


def test_host_workload_does_the_same_work_in_every_pass() -> None:
    first, second = host.workload(), host.workload()
    assert first[1] == second[1]  # same input, same calls: the time is the host's, not the work's
    assert first[0] > 0 and second[0] > 0


def test_speed_bench_scales_its_cpu_times_by_the_host_workload() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.changepoints.speed", "--series", "30", "--points", "120",
                           "--jobs", "1"], capture_output=True, text=True, check=True, timeout=300,
                          env={**os.environ, "COLUMNS": "400"})
    out = done.stdout
    cpu = float(re.search(r"s wall, ([\d.]+) s CPU per process", out).group(1))
    commit_cpu = float(re.search(r"s wall, ([\d.]+) s / [\d.]+ s CPU \(", out).group(1))
    analysis_host, commit_host = map(float, re.search(r"×([\d.]+) / ×([\d.]+) the reference host's", out).groups())
    assert 0.05 < analysis_host < 20 and 0.05 < commit_host < 20  # the workload ran, and was timed
    scaled, scaled_commit = map(float, re.search(r"([\d.]+) s and ([\d.]+) s CPU", out).groups())
    assert scaled == pytest.approx(cpu / analysis_host, rel=0.05, abs=0.1)
    assert scaled_commit == pytest.approx(commit_cpu / commit_host, rel=0.05, abs=0.01)
