"""The A/B decision rule on numbers: what counts is min_effect, noise only decides rounds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from roofwatch.ab.abtest import (
    MIN_ROUNDS,
    PairedRounds,
    needs_more_rounds,
    overall,
    process_value,
    verdicts,
)


def rounds(level: float, offsets: list[float]) -> list[float]:
    """Per-process values: ``level`` times ``1 + offset`` for each round."""
    return [level * (1 + o) for o in offsets]


QUIET = [0.001, -0.002, 0.0015, -0.0005, 0.002, -0.001, 0.0, 0.0012]
# Each process off by up to ±25 %, so a round's head/base ratio is off by up to ±50 %, as on a
# loaded two-core host.
NOISY_50 = [0.25, -0.15, 0.22, -0.2, 0.1, -0.25, 0.18, -0.1]


@pytest.mark.parametrize(("base", "head", "expected"), [
    # a big slowdown through quiet rounds: significant and beyond min_effect
    (rounds(1.0, QUIET[:5]), rounds(2.0, QUIET[3:8]), "regression"),
    # a 2.4x slowdown through ±50 % per-round noise: the interval lies far above +2 %
    (rounds(1.0, NOISY_50), rounds(2.4, NOISY_50[::-1]), "regression"),
    # the mirror image
    (rounds(2.0, QUIET[:5]), rounds(1.0, QUIET[3:8]), "improvement"),
    # identical code in quiet rounds: the interval lies within ±2 %
    (rounds(1.0, QUIET), rounds(1.0, QUIET[::-1]), "none"),
    # +1 %, significant in quiet rounds, but smaller than what counts and shown to be: none
    (rounds(1.0, QUIET), rounds(1.01, QUIET[::-1]), "none"),
    # identical code in ±50 % noise: never green, never a regression
    (rounds(1.0, NOISY_50), rounds(1.0, NOISY_50[::-1]), "inconclusive"),
    # +5 % in ±50 % noise: the data cannot tell
    (rounds(1.0, NOISY_50), rounds(1.05, NOISY_50[::-1]), "inconclusive"),
    # fewer than MIN_ROUNDS
    ([1.0, 1.0], [2.0, 2.0], "inconclusive"),
])
def test_directions(base: list[float], head: list[float], expected: str) -> None:
    (verdict,) = verdicts([PairedRounds(base, head)])
    assert verdict.direction == expected, verdict.reason


def test_the_interval_shown_is_the_one_decided_with() -> None:
    (v,) = verdicts([PairedRounds(rounds(1.0, NOISY_50), rounds(2.4, NOISY_50[::-1]))])
    assert v.ci_low > v.threshold_pct and v.ci_low < v.change_pct < v.ci_high
    assert f"{v.confidence:.2%}" in v.reason and v.confidence >= 0.99


def test_noise_never_moves_what_counts() -> None:
    quiet, noisy = verdicts([PairedRounds(rounds(1.0, QUIET), rounds(1.0, QUIET[::-1])),
                             PairedRounds(rounds(1.0, NOISY_50), rounds(1.0, NOISY_50[::-1]))])
    assert quiet.threshold_pct == noisy.threshold_pct == 2.0
    assert noisy.noise_pct > 10 * quiet.noise_pct


@pytest.mark.parametrize(("min_effect", "expected"), [(0.02, "regression"), (0.10, "none")])
def test_min_effect_is_the_teams(min_effect: float, expected: str) -> None:
    base, head = rounds(1.0, QUIET), rounds(1.05, QUIET[::-1])
    (v,) = verdicts([PairedRounds(base, head, min_effect=min_effect)])
    assert v.direction == expected and v.threshold_pct == pytest.approx(100 * min_effect)


def test_one_wild_round_never_names_a_regression() -> None:
    base = rounds(1.0, QUIET[:4])
    head = rounds(1.0, QUIET[4:8])
    head[2] *= 1.8  # one process on a busy host
    (v,) = verdicts([PairedRounds(base, head)])
    assert v.direction == "inconclusive"


def test_three_equal_rounds_need_a_fourth_before_a_change_is_named() -> None:
    (three,) = verdicts([PairedRounds(rounds(1.0, QUIET[:3]), rounds(1.5, QUIET[:3]))])
    (four,) = verdicts([PairedRounds(rounds(1.0, QUIET[:4]), rounds(1.5, QUIET[:4]))])
    assert three.direction == "inconclusive" and three.rounds_needed == MIN_ROUNDS + 1
    assert four.direction == "regression"


def test_a_known_noise_floor_keeps_coincidentally_equal_rounds_from_deciding() -> None:
    base, head = rounds(1.0, [0, 0, 0, 0, 0]), rounds(1.3, [0, 0.001, 0, 0.001, 0])
    (bare,) = verdicts([PairedRounds(base, head)])
    (floored,) = verdicts([PairedRounds(base, head, noise_floor=0.35)])
    assert bare.direction == "regression" and floored.direction == "inconclusive"


def test_throughput_units_flip_the_sign() -> None:
    (v,) = verdicts([PairedRounds(rounds(100.0, QUIET[:5]), rounds(50.0, QUIET[:5]), higher_is_better=True)])
    assert v.direction == "regression" and v.change_pct > 0


def test_inconclusive_says_what_would_settle_it() -> None:
    settle, hopeless = verdicts([
        PairedRounds(rounds(1.0, [0.01, -0.01, 0.015]), rounds(1.0, [-0.01, 0.012, 0.0])),
        PairedRounds(rounds(1.0, NOISY_50), rounds(1.0, NOISY_50[::-1])),
    ])
    assert settle.direction == "inconclusive" and settle.rounds_needed and settle.rounds_needed > 3
    assert f"about {settle.rounds_needed} rounds" in settle.reason
    assert hopeless.rounds_needed is None and "cannot be judged" in hopeless.reason
    assert needs_more_rounds([settle]) and not needs_more_rounds([hopeless])


def test_identical_code_is_not_called_a_change_over_many_simulated_comparisons() -> None:
    rng = np.random.default_rng(7)
    changes = 0
    for _ in range(300):
        pairs = [PairedRounds(list(np.exp(rng.normal(0, 0.02, 8))), list(np.exp(rng.normal(0, 0.02, 8))))
                 for _ in range(10)]
        changes += sum(v.direction in ("regression", "improvement") for v in verdicts(pairs))
    assert changes <= 3  # 3,000 benchmark-comparisons; bench.verdicts measures the rate properly


@pytest.mark.parametrize(("samples", "timer", "expected"), [
    ([1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0], "host", 2.0),  # host timer: the median
    ([1.0] * 9 + [3.0] * 11, "cuda_event", 1.0),  # GPU timer: the fast mode, whatever the slow share
    ([1.0] * 18 + [3.0] * 2, "cuda_event", 1.0),
    ([5.0], "cuda_event", 5.0),
])
def test_process_value(samples: list[float], timer: str, expected: float) -> None:
    median = float(np.median(samples))
    assert process_value(samples, median if timer == "host" else median, timer) == pytest.approx(
        expected if timer != "host" else median)


@pytest.mark.parametrize(("directions", "word"), [
    (["none", "none"], "no-change"), (["none", "improvement"], "improvement"),
    (["improvement", "inconclusive"], "inconclusive"), (["inconclusive", "regression"], "regression"),
])
def test_overall_word(directions: list[str], word: str) -> None:
    levels = {"none": 1.0, "improvement": 0.5, "regression": 2.0}
    pairs = []
    for d in directions:
        if d == "inconclusive":
            pairs.append(PairedRounds([1.0, 1.0], [1.0, 1.0]))
        else:
            pairs.append(PairedRounds(rounds(1.0, QUIET[:6]), rounds(levels[d], QUIET[2:8])))
    assert overall(verdicts(pairs)) == word


def test_undecided_rows_have_no_interval_and_valid_numbers() -> None:
    (v,) = verdicts([PairedRounds([1.0], [1.0])])
    assert (v.ci_low, v.ci_high) == (0.0, 0.0) and math.isinf(v.mde_pct) and v.rounds == 1


@pytest.mark.parametrize(("noise", "rounds", "judgeable"), [
    (0.002, 10, True),   # a quiet GPU kernel: ±2 % is settled well within 10 rounds
    (0.05, 10, False),   # 5 % between processes: 10 rounds cannot rule out a 2 % change
    (0.05, 200, True),   # … 200 could
    (0.50, 10, False),
])
def test_what_an_ab_can_judge_at_a_noise(noise: float, rounds: int, judgeable: bool) -> None:
    from roofwatch.ab.abtest import can_judge, smallest_detectable

    assert can_judge(noise, rounds) is judgeable
    assert smallest_detectable(noise, rounds) > 0.02
    assert smallest_detectable(noise, rounds) < smallest_detectable(2 * noise, rounds)


def test_an_advantage_of_the_second_process_slot_is_taken_out_by_the_crossover_fit() -> None:
    # Head 5 % slower; whichever process runs second gains 30 % (a warm cache), rounds alternate.
    head_first = [False, True, True, False, False, True]
    jitter = [0.004, -0.003, 0.002, -0.004, 0.003, -0.002]
    base, head = [], []
    for first, e in zip(head_first, jitter):
        slot = 0.3 if not first else -0.3  # the head's share of the slot effect
        base.append(1.0)
        head.append(1.05 * math.exp(slot / 2 + e) / math.exp(-slot / 2))
    plain, crossover = verdicts([PairedRounds(base, head), PairedRounds(base, head, head_first=head_first)])
    assert plain.direction == "inconclusive"
    assert crossover.direction == "regression" and 3 < crossover.change_pct < 7


@pytest.mark.parametrize(("change", "noise", "rounds", "needed"), [
    # unchanged code at 5 % noise: a round's difference spreads √2 × 5 %, so t · 7.1 % / √n < 2 % at n = 85
    (0.0, 0.05, 3, range(85, 86)),
    # the quieter, the fewer; never fewer than one more than measured, nor than a change needs (4)
    (0.0, 0.01, 3, range(7, 8)),
    (0.10, 0.0, 3, range(4, 5)),
    (0.10, 0.0, 7, range(8, 9)),
    # an estimate just inside the bound, or noise no cap of rounds narrows: no number of rounds
    (0.0199, 0.05, 5, None),
    (0.0, 0.60, 3, None),
])
def test_rounds_that_would_settle_a_benchmark_as_a_report_stores_it(change: float, noise: float, rounds: int,
                                                                     needed: range | None) -> None:
    from roofwatch.ab.abtest import rounds_for

    found = rounds_for(change, noise, rounds)
    assert found in needed if needed is not None else found is None, found


@pytest.mark.parametrize(("change", "noise", "rounds", "effect"), [
    # ±60 % noise, 10 rounds: t(0.995, 9) · √2 · ln 1.6 / √10 ≈ 0.68 in log terms, so about 97 %
    (0.0, 0.60, 10, 0.98),
    (0.0, 0.20, 10, 0.31),
    (0.0, 0.20, 40, 0.12),  # more rounds, a smaller one
    (0.05, 0.20, 10, 0.37),  # the estimate's own size counts too
    (0.0, 0.001, 10, 0.002),  # below 1 %: tenths of one
])
def test_the_smallest_min_effect_a_number_of_rounds_settles(change: float, noise: float, rounds: int,
                                                            effect: float) -> None:
    from roofwatch.ab.abtest import DEFAULT_ALPHA, min_effect_settled, rounds_for

    found = min_effect_settled(change, noise, rounds)
    assert found == pytest.approx(effect), found
    # and it is honest: at that min_effect the same rounds settle it, at one step less they do not
    assert (needed := rounds_for(change, noise, rounds, found, DEFAULT_ALPHA)) is not None and needed <= rounds + 1
