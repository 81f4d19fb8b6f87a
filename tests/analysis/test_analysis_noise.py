"""Reading a series' noise: where its stretches are cut before its modes are read."""

from __future__ import annotations

import numpy as np
import pytest

from bench.changepoints.histories import cell
from roofwatch.service.analysis import noise

N = 200


@pytest.mark.parametrize("seed", range(5))
def test_a_short_bump_that_no_single_split_shows_is_cut_at_both_ends(seed: int) -> None:
    """15 commits 5 % up in 1 % noise: no single split's rank sum reaches 2 deviations, the bump's reaches 6."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 0.01, N)
    x[92:107] += 0.05
    first, last = noise.rank_shifts(x, 5)
    assert abs(first - 92) <= 2 and abs(last - 107) <= 5


@pytest.mark.parametrize("seed", range(5))
def test_a_stretch_whose_ranks_spread_out_is_cut_where_they_do(seed: int) -> None:
    """One mode, then two either side of it: the mean rank holds, the spread of the ranks moves."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 0.01, N)
    x[100:] += np.where(np.arange(N - 100) % 2, 0.05, -0.05)
    assert noise.rank_shifts(x, 5) == [100]


@pytest.mark.parametrize("seed", range(20))
def test_a_quiet_series_is_not_cut(seed: int) -> None:
    assert noise.rank_shifts(np.random.default_rng(seed).normal(0.0, 0.01, N), 5) == []


@pytest.mark.parametrize(("level", "seed", "index", "truth"), [
    # the slow share rises at 61, then every mode falls 30 % at 116, the new slow band onto the old fast mode
    (0.01, 4, 4, [(16, "location"), (61, "mix"), (116, "location")]),
    # every mode falls 20 % at 67, below the fast mode, as the slow share rises: before, the middle ranks; after,
    # the lowest and the highest
    (0.003, 7, 9, [(67, "location"), (77, "mix"), (150, "location")]),
])
def test_a_gpu_series_whose_changes_cancel_in_rank_is_read_bimodal(level: float, seed: int, index: int,
                                                                 truth: list[tuple[int, str]]) -> None:
    """H200-like histories (acceptance generator, tuning seeds) that Mann-Whitney binary segmentation left uncut:
    read as one stretch, their slow points sat in long runs and the series read as a level that moved."""
    history = cell("bimodal", level, 20, seed)[index]
    assert history.detail == "gpu" and [(c.index, c.shift) for c in history.changes] == truth
    assert noise.read_noise(np.log(history.values), 5).bimodal
