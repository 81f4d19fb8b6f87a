"""roofwatch.exposure: a case must tell each plausible wrong term from the right result.

The check on plain tensors first, then the example kernel (``example_kernel.smooth_scale``), whose
planted ``eps / (cols - 1)`` passes a long row, where ``assert_exposes`` says the term cannot
show, and fails a short one, where it says it can.
"""

from __future__ import annotations

import math

import pytest
import torch
from support.example_kernel import INTERPRETED, VANISHING_TERM, smooth_scale, smooth_scale_reference

from roofwatch.exposure import assert_exposes
from roofwatch.tolerances import Tolerance, assert_close, tolerance_for

BOUND = Tolerance(atol=1e-5, rtol=1e-3)


def test_an_alternative_far_enough_away_is_exposed() -> None:
    expected = torch.ones(10, dtype=torch.float64)
    shifted = expected.clone()
    shifted[3] += 0.5  # 500 bounds away, in one element

    reach = assert_exposes(expected, {"one element off": shifted}, BOUND)

    assert reach["one element off"] == pytest.approx(0.5 / (1e-5 + 1e-3))


def test_alternatives_within_the_margin_are_named() -> None:
    expected = torch.ones(10, dtype=torch.float64)
    near = expected * (1 + 1.5e-3)  # 1.5 bounds: a kernel computing it, then rounding, might pass
    far = expected * 2
    with pytest.raises(AssertionError, match=r"cannot tell 1 wrong formula\(s\).*'slightly scaled' \(at most 1.4"):
        assert_exposes(expected, {"slightly scaled": near, "doubled": far}, BOUND)
    assert assert_exposes(expected, {"slightly scaled": near}, BOUND, margin=1.0)["slightly scaled"] > 1.0


def test_an_alternative_that_turns_nan_is_exposed() -> None:
    # A dropped eps on a zero row divides 0 by 0: any check fails on the NaN.
    expected = torch.zeros(4, dtype=torch.float64)
    assert assert_exposes(expected, {"eps dropped": torch.full((4,), math.nan)}, BOUND) == {"eps dropped": math.inf}


def test_a_non_finite_right_result_is_refused() -> None:
    with pytest.raises(AssertionError, match="right result contains NaN/Inf"):
        assert_exposes(torch.tensor([math.inf]), {"x": torch.zeros(1)}, BOUND)


EPS = 0.1


def _smooth_scale_case(cols: int, dtype: torch.dtype, bug: int = 0) -> tuple[torch.Tensor, torch.Tensor, dict]:
    gen = torch.Generator().manual_seed(0)
    x, weight = torch.randn((4, cols), generator=gen).to(dtype), torch.randn(cols, generator=gen).to(dtype)
    device = "cpu" if INTERPRETED else "cuda"
    out = smooth_scale(x.to(device), weight.to(device), EPS, bug=bug).cpu()
    alternatives = {"eps / (cols - 1)": smooth_scale_reference(x, weight, EPS, uniform_over=cols - 1)}
    return out, smooth_scale_reference(x, weight, EPS), alternatives


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_a_long_row_hides_the_wrong_term_and_says_so(dtype: torch.dtype) -> None:
    out, expected, alternatives = _smooth_scale_case(4096, dtype, bug=VANISHING_TERM)

    assert_close(out, expected, tolerance_for(dtype))  # the planted bug passes
    with pytest.raises(AssertionError, match=r"cannot tell 1 wrong formula\(s\).*'eps / \(cols - 1\)'"):
        assert_exposes(expected, alternatives, tolerance_for(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_a_short_row_exposes_the_wrong_term_and_catches_it(dtype: torch.dtype) -> None:
    out, expected, alternatives = _smooth_scale_case(3, dtype)
    assert_close(out, expected, tolerance_for(dtype))
    assert_exposes(expected, alternatives, tolerance_for(dtype))

    planted, _, _ = _smooth_scale_case(3, dtype, bug=VANISHING_TERM)
    with pytest.raises(AssertionError, match="elements exceed"):
        assert_close(planted, expected, tolerance_for(dtype))
