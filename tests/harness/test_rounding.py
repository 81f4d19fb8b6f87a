"""roofwatch.rounding: outputs rounded once, and the double rounding that per-dtype bounds miss.

The rounding itself first (ulps, a single rounding where torch's ``.to()`` from fp64 rounds twice,
the bounds of both rounding modes, the fp32 allowance where terms cancel), then the store
rounding it assumes, probed on the installed Triton, then the example kernel
(``example_kernel.smooth_scale``): correctly rounded, and its planted double rounding passing the
per-dtype tolerance but not this check.
"""

from __future__ import annotations

import pytest
import torch
from support.example_kernel import (
    DOUBLE_ROUNDING,
    INTERPRETED,
    smooth_scale,
    smooth_scale_kernel,
    smooth_scale_reference,
)

from roofwatch.rounding import (
    assert_correctly_rounded,
    kernel_store_rounding,
    record_rounding,
    round_once,
    ulp,
)
from roofwatch.tolerances import assert_close, tolerance_for

FP16_ULP_AT_1 = 2.0**-10
BF16_ULP_AT_1 = 2.0**-7


@pytest.mark.parametrize(
    ("value", "dtype", "spacing"),
    [
        (1.0, torch.float16, 2.0**-10),
        (1.999, torch.float16, 2.0**-10),
        (2.0, torch.float16, 2.0**-9),
        (-3.0, torch.bfloat16, 2.0**-6),
        (6.0e4, torch.float16, 32.0),
        (2.0**-14, torch.float16, 2.0**-24),  # the smallest normal
        (1.0e-7, torch.float16, 2.0**-24),  # subnormal: the fixed spacing
        (0.0, torch.float16, 2.0**-24),
        (0.0, torch.bfloat16, 2.0**-133),
        (1.0, torch.float32, 2.0**-23),
    ],
)
def test_ulp_is_the_spacing_of_the_dtype_at_the_value(value: float, dtype: torch.dtype, spacing: float) -> None:
    assert ulp(torch.tensor([value], dtype=torch.float64), dtype).item() == spacing


def test_round_once_rounds_where_torch_rounds_twice() -> None:
    # Just above the midpoint between 1 and the next fp16 number: the nearest fp16 is above.
    # torch converts fp64 -> fp32 -> fp16; the fp32 step lands on the midpoint exactly, and
    # ties-to-even then rounds down to 1.
    x = torch.tensor([1.0 + FP16_ULP_AT_1 / 2 + 2.0**-40, 1.0 + BF16_ULP_AT_1 / 2 + 2.0**-40], dtype=torch.float64)

    assert x[:1].to(torch.float16).item() == 1.0
    assert round_once(x[:1], torch.float16).item() == 1.0 + FP16_ULP_AT_1
    assert x[1:].to(torch.bfloat16).item() == 1.0
    assert round_once(x[1:], torch.bfloat16).item() == 1.0 + BF16_ULP_AT_1


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_round_once_modes_agree_with_the_bounds(dtype: torch.dtype) -> None:
    x = torch.randn(20_000, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 100
    step = ulp(x, dtype)

    nearest = round_once(x, dtype).double()
    truncated = round_once(x, dtype, "toward_zero").double()

    assert ((nearest - x).abs() <= step / 2).all()
    assert ((x.abs() - truncated.abs() >= 0) & (x.abs() - truncated.abs() < step)).all()
    assert (truncated.sign() == x.sign()).all()
    # Ties go to even: 1 + 3/2 ulp lies between 1 + 1 ulp (odd) and 1 + 2 ulps (even).
    tie = torch.tensor([1.0 + 1.5 * ulp(torch.ones(1, dtype=torch.float64), dtype).item()], dtype=torch.float64)
    assert round_once(tie, dtype).item() == 1.0 + 2 * ulp(torch.ones(1, dtype=torch.float64), dtype).item()


def test_round_once_overflows_as_a_store_would() -> None:
    x = torch.tensor([65520.0, -1e6, 65519.0], dtype=torch.float64)
    assert round_once(x, torch.float16).tolist() == [float("inf"), float("-inf"), 65504.0]
    assert round_once(x, torch.float16, "toward_zero").tolist() == [65504.0, -65504.0, 65504.0]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_a_correctly_rounded_output_passes_in_either_mode(dtype: torch.dtype) -> None:
    exact = torch.randn((50, 40), generator=torch.Generator().manual_seed(1), dtype=torch.float64)

    stats = assert_correctly_rounded(round_once(exact, dtype), exact, rounding="nearest")
    assert stats.beyond_half_ulp == 0.0 and stats.max_ulps <= 0.5

    stats = assert_correctly_rounded(round_once(exact, dtype, "toward_zero"), exact, rounding="toward_zero")
    assert 0.3 < stats.beyond_half_ulp < 0.7 and stats.max_ulps < 1.0


def test_each_mode_holds_the_other_to_its_own_bound() -> None:
    exact = torch.randn(1000, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with pytest.raises(AssertionError, match=r"not the correctly rounded bf16 value \(rounded nearest"):
        assert_correctly_rounded(round_once(exact, torch.bfloat16, "toward_zero"), exact, rounding="nearest")
    with pytest.raises(AssertionError, match=r"rounded toward zero: within one ulp toward zero"):
        assert_correctly_rounded(round_once(exact, torch.bfloat16), exact, rounding="toward_zero")


def test_double_rounding_fails_and_reports_its_share() -> None:
    # A result rounded to fp16, scaled in fp32, rounded again: what a kernel does when it
    # casts before its last scale. Within the fp16 tolerance (two ulps), not within half an ulp.
    gen = torch.Generator().manual_seed(3)
    x, scale = torch.randn(4000, generator=gen, dtype=torch.float64), torch.randn(4000, generator=gen).double()
    twice = round_once(round_once(x, torch.float16).double() * scale, torch.float16)
    exact = x * scale

    assert_close(twice, exact, tolerance_for(torch.float16))
    with pytest.raises(AssertionError, match=r"of 4000 elements are not the correctly rounded fp16 value.*"
                                             r"% of elements beyond half an ulp"):
        assert_correctly_rounded(twice, exact, rounding="nearest")


def test_the_allowance_follows_the_terms_that_cancel() -> None:
    # a - b computed in fp32 from values near 1e3, exact result near 1: fp32's error is a few
    # ulps of 1e3, far more than half an fp16 ulp of the result. With the terms given it is
    # allowed; without, it is not.
    gen = torch.Generator().manual_seed(4)
    a = 1000 + torch.rand(500, generator=gen, dtype=torch.float64)
    b = 1000 + torch.rand(500, generator=gen, dtype=torch.float64)
    fp32_result = (a.float() - b.float()).to(torch.float16)

    with pytest.raises(AssertionError, match="not the correctly rounded fp16 value"):
        assert_correctly_rounded(fp32_result, a - b, rounding="nearest")
    assert_correctly_rounded(fp32_result, a - b, terms=a.abs() + b.abs(), fp32_ulps=2, rounding="nearest")


def test_underflow_allowance_scales_with_what_follows_the_intermediate() -> None:
    # silu(g) * up in bf16 at g = -91.5: fp32's sigmoid is 0 (exp(91.5) overflows), bf16 holds
    # the exact 2.4e-35. Allowed only when the output's factor after sigmoid is declared.
    gate, up = torch.tensor([-91.5], dtype=torch.float64), torch.tensor([-1416.0], dtype=torch.float64)
    exact = gate * torch.sigmoid(gate) * up
    zero = torch.zeros(1, dtype=torch.bfloat16)
    with pytest.raises(AssertionError, match="not the correctly rounded bf16 value"):
        assert_correctly_rounded(zero, exact, rounding="nearest")
    assert_correctly_rounded(zero, exact, underflow_scale=(gate * up).abs(), rounding="nearest")
    # A result under fp32's smallest normal may always be flushed.
    assert_correctly_rounded(zero, torch.tensor([5.9e-39], dtype=torch.float64), rounding="nearest")


def test_nan_and_shape_mismatches_fail_and_fp32_is_refused() -> None:
    exact = torch.ones(4, dtype=torch.float64)
    with pytest.raises(AssertionError, match="are NaN/Inf"):
        assert_correctly_rounded(torch.tensor([1.0, float("nan"), 1.0, 1.0], dtype=torch.float16), exact)
    with pytest.raises(AssertionError, match="shape"):
        assert_correctly_rounded(torch.ones(3, dtype=torch.float16), exact)
    with pytest.raises(ValueError, match="fp16 and bf16"):
        assert_correctly_rounded(torch.ones(4), exact)


def test_record_rounding_writes_the_share_and_the_largest_error() -> None:
    recorded: dict[str, object] = {}
    exact = torch.randn(100, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    stats = assert_correctly_rounded(round_once(exact, torch.float16), exact, rounding="nearest")
    record_rounding(recorded.__setitem__, stats, prefix="grad_")
    assert recorded == {"grad_beyond_half_ulp": 0.0, "grad_max_err_ulps": stats.max_ulps}


def test_kernel_store_rounding_reads_the_interpreter_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert kernel_store_rounding(torch.bfloat16) == "toward_zero"
    assert kernel_store_rounding(torch.float16) == "nearest"
    monkeypatch.delenv("TRITON_INTERPRET")
    assert kernel_store_rounding(torch.bfloat16) == "nearest"
    assert kernel_store_rounding(torch.bfloat16, interpreted=True) == "toward_zero"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_the_store_rounding_is_what_this_triton_does(dtype: torch.dtype) -> None:
    # Keeps kernel_store_rounding honest: fp32 values stored as dtype by a Triton kernel round
    # exactly as it claims, on the installed Triton, interpreted or compiled.
    device = "cpu" if INTERPRETED else "cuda"
    x = (torch.randn((4, 333), generator=torch.Generator().manual_seed(6)) * 10).to(device)
    out = torch.empty((4, 333), dtype=dtype, device=device)

    # eps = 0 and a weight of ones: y = x exactly in fp32, then one store.
    smooth_scale_kernel[(4,)](x, torch.ones(333, device=device), out, x.stride(0), 1, out.stride(0), 333, 0.0,
                               BUG=0, BLOCK=512)

    mode = kernel_store_rounding(dtype, interpreted=INTERPRETED)
    assert torch.equal(out.cpu(), round_once(x.double().cpu(), dtype, mode))


def _example(dtype: torch.dtype, bug: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(7)
    x = torch.randn((6, 300), generator=gen).to(dtype)
    weight = torch.randn(300, generator=gen).to(dtype)
    device = "cpu" if INTERPRETED else "cuda"
    out = smooth_scale(x.to(device), weight.to(device), 0.1, bug=bug)
    return out.cpu(), smooth_scale_reference(x, weight, 0.1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_the_example_kernel_rounds_once(dtype: torch.dtype) -> None:
    out, expected = _example(dtype)
    # Three fp32 operations: (1 - eps) * x, * weight, + eps / cols, each half an fp32 ulp.
    stats = assert_correctly_rounded(out, expected, fp32_ulps=2, rounding=kernel_store_rounding(dtype, INTERPRETED))
    if kernel_store_rounding(dtype, INTERPRETED) == "nearest":
        assert stats.beyond_half_ulp == 0.0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_correct_rounding_catches_the_double_rounding_the_tolerance_lets_through(dtype: torch.dtype) -> None:
    out, expected = _example(dtype, bug=DOUBLE_ROUNDING)

    assert_close(out, expected, tolerance_for(dtype))
    with pytest.raises(AssertionError, match=f"not the correctly rounded {'fp16' if dtype == torch.float16 else 'bf16'}"):
        assert_correctly_rounded(out, expected, fp32_ulps=2, rounding=kernel_store_rounding(dtype, INTERPRETED))
