"""numpy's median, quantiles and weighted mean, to the same bits (``analysis.arrays``)."""

from __future__ import annotations

import numpy as np
import pytest

from roofwatch.service.analysis import arrays


def _values(n: int, seed: int) -> np.ndarray:
    """Heavy-tailed values of any scale; rounded (ties) for odd seeds."""
    rng = np.random.default_rng(seed)
    values = rng.standard_t(3, n) * 10.0 ** rng.integers(-4, 4)
    return np.round(values, 1) if seed % 2 else values


@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 11, 64, 199, 500])
@pytest.mark.parametrize("seed", range(5))
def test_quantiles_are_numpys_to_the_last_bit(n: int, seed: int) -> None:
    values = _values(n, seed)
    q = (0.0, 0.01, 0.05, 0.2, 0.25, 0.4, 0.5, 0.75, 0.95, 1.0, float(np.random.default_rng(seed).random()))
    assert arrays.quantiles(values, q) == np.quantile(values, q).tolist()


@pytest.mark.parametrize("n", [1, 2, 3, 4, 9, 10, 199, 200])
@pytest.mark.parametrize("seed", range(5))
def test_median_is_numpys_to_the_last_bit(n: int, seed: int) -> None:
    values = _values(n, seed)
    assert arrays.median(values) == float(np.median(values))


def test_median_of_values_with_a_nan_is_nan() -> None:
    assert np.isnan(arrays.median(np.array([1.0, np.nan, 2.0])))


@pytest.mark.parametrize("n", [1, 2, 7, 80, 500])
@pytest.mark.parametrize("seed", range(5))
def test_weighted_mean_is_numpys_average_to_the_last_bit(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    values, weights = rng.normal(-9.0, 0.01, n), rng.choice([1.0, 0.04, 0.3], n)
    assert arrays.weighted_mean(values, weights) == float(np.average(values, weights=weights))


def test_weights_that_sum_to_zero_are_an_error_as_in_numpy() -> None:
    with pytest.raises(ZeroDivisionError):
        arrays.weighted_mean(np.array([1.0, 2.0]), np.zeros(2))
