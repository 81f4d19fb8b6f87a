"""Correctly rounded outputs: a kernel that computes in fp32 and stores fp16/bf16 once.

Such a kernel's output is the exact result rounded once to the storage dtype, give or take what
the fp32 arithmetic itself lost: every element within half an ulp of the exact value, plus that
allowance. A kernel that rounds twice (casts to fp16/bf16, then applies a last scale: a weight,
the 1/n of a mean, a per-channel scale) is off by up to a whole ulp, which the usual two-ulp
tolerances let through and which biases real models; here it fails.

The allowance is ``fp32_ulps`` fp32 roundings of ``terms``, the magnitude of what the fp32
computation adds up or cancels (the formula evaluated on absolute values; ``|expected|`` when
nothing cancels), plus fp32's smallest normal: a result below it may be flushed to zero (a GPU
under fast math does, and the interpreter's bf16 conversion does). An intermediate may
underflow too, or be out of reach of the formula (sigmoid as ``1 / (1 + exp(-x))`` is 0 once
``exp(-x)`` overflows), and the factors applied after it carry that loss into the output:
``underflow_scale`` is their magnitude, and adds that many smallest normals.
Choose ``fp32_ulps`` from the kernel's longest chain of fp32 operations (a tree sum of ``n``
terms is ``log2(n)`` deep; each exp, rsqrt or divide a few ulps more on a GPU, where they are
approximate).

Where the output is stored decides the rounding: a GPU rounds fp32 to nearest even, and so
does torch's ``.to()`` of an fp32 value (from fp64 it rounds twice, through fp32: see
``round_once``). The Triton interpreter (3.x) converts fp32 -> bf16 by dropping the low
bits (``_convert_float`` without a rounding mode): a bf16 store there rounds toward zero, one
ulp at worst. ``kernel_store_rounding`` says which applies, and the check holds the kernel to
that mode's own bound, so it stays as strict as the store allows on both.

The share of elements beyond half an ulp is returned (``RoundingStats``) and recorded as the
JUnit property ``beyond_half_ulp``: a kernel whose arithmetic drifts (a reordered sum, an
approximate divide, a new intermediate rounding) shows there before any bound is crossed.
"""

import os
from collections.abc import Callable
from typing import Literal, NamedTuple

import torch

from roofwatch.tolerances import dtype_name

__all__ = ["Rounding", "RoundingStats", "assert_correctly_rounded", "kernel_store_rounding", "record_rounding",
           "round_once", "ulp"]

Rounding = Literal["nearest", "toward_zero"]
_LOW_PRECISION = (torch.float16, torch.bfloat16)
# Significand bits, the implicit leading one included.
_SIGNIFICAND_BITS = {torch.float32: 24, torch.float16: 11, torch.bfloat16: 8}


class RoundingStats(NamedTuple):
    """How far an output is from the exact values, in ulps of the storage dtype at each value.

    ``beyond_half_ulp`` is the share (0 to 1) of elements further than half an ulp away: 0 for
    an output correctly rounded to nearest, whatever its fp32 arithmetic added aside.
    """

    max_ulps: float
    beyond_half_ulp: float


def _frexp_exponent_of_tiny(dtype: torch.dtype) -> int:
    # frexp writes x = m * 2**e with 0.5 <= |m| < 1; the smallest normal is 0.5 * 2**(e_min).
    return int(torch.frexp(torch.tensor(torch.finfo(dtype).tiny, dtype=torch.float64)).exponent)


def ulp(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The spacing of ``dtype``'s values around each element of ``x``, in fp64.

    For ``x`` in ``[2**(e-1), 2**e)`` that is ``2**(e - p)``, ``p`` being ``dtype``'s significand
    bits (11 for fp16, 8 for bf16); below the smallest normal it is the subnormal spacing, and at
    0 too. Rounding to nearest moves a value by at most half of it, rounding toward zero by less
    than all of it.
    """
    if dtype not in _SIGNIFICAND_BITS:
        raise ValueError(f"ulp is defined here for fp32, fp16 and bf16, got {dtype}")
    bits = _SIGNIFICAND_BITS[dtype]
    x64 = x.detach().to(torch.float64)
    smallest = _frexp_exponent_of_tiny(dtype)
    # frexp gives 0 an exponent of 0; its neighbours are the smallest subnormals.
    exponent = torch.where(x64 == 0, smallest, torch.frexp(x64).exponent).clamp_min(smallest)
    return torch.ldexp(torch.ones_like(exponent, dtype=torch.float64), exponent - bits)


def round_once(x: torch.Tensor, dtype: torch.dtype, rounding: Rounding = "nearest") -> torch.Tensor:
    """``x`` rounded once to ``dtype`` (nearest even, or toward zero), as a ``dtype`` tensor.

    torch's ``x.to(dtype)`` from fp64 goes through fp32 and so rounds twice: a value just above
    the midpoint between two fp16 numbers can land on the midpoint in fp32 and then round to
    even, away from the nearest one. Here the rounding happens in fp64 on the exact scaled
    value, and the conversion that follows is exact. Values beyond ``dtype``'s range become
    ±inf when rounded to nearest and ±max toward zero.
    """
    x64 = x.detach().to(torch.float64)
    step = ulp(x64, dtype)
    # x / step is exact (a power-of-two scaling) and at most 2**p in magnitude.
    scaled = x64 / step
    whole = torch.round(scaled) if rounding == "nearest" else torch.trunc(scaled)
    rounded = whole * step
    limit = torch.finfo(dtype).max
    if rounding == "nearest":
        rounded = torch.where(rounded.abs() > limit, rounded.sign() * torch.inf, rounded)
    else:
        rounded = rounded.clamp(-limit, limit)
    return rounded.to(dtype)


def kernel_store_rounding(dtype: torch.dtype, interpreted: bool | None = None) -> Rounding:
    """How a Triton kernel's ``.to(dtype)`` of an fp32 value rounds where it runs.

    Toward zero for bf16 under the Triton interpreter, which truncates the fp32 significand; to
    nearest even everywhere else (compiled for a GPU, and fp16 in the interpreter, which numpy
    converts). ``interpreted`` says whether the kernel runs in the interpreter; ``None`` reads
    ``TRITON_INTERPRET`` as ``triton.jit`` does when it decorates a kernel. Outputs rounded by
    torch (a host-side ``.to()``) are always rounded to nearest.
    """
    if interpreted is None:
        interpreted = os.environ.get("TRITON_INTERPRET", "0") == "1"
    return "toward_zero" if interpreted and dtype == torch.bfloat16 else "nearest"


def assert_correctly_rounded(
    actual: torch.Tensor,
    expected: torch.Tensor,
    *,
    terms: torch.Tensor | None = None,
    fp32_ulps: float = 4.0,
    underflow_scale: torch.Tensor | float = 0.0,
    rounding: Rounding | None = None,
) -> RoundingStats:
    """Check that ``actual`` is ``expected`` rounded once to ``actual.dtype``, up to fp32's own error.

    Args:
        actual: an fp16 or bf16 kernel output.
        expected: the exact result, ideally fp64, same shape, finite.
        terms: magnitude of what the fp32 computation adds up or cancels, element-wise
            (broadcastable to ``expected``); ``None`` means ``|expected|``.
        fp32_ulps: how many fp32 roundings of ``terms`` the computation may lose before the
            store (see the module docstring).
        underflow_scale: what the output multiplies an fp32 intermediate by that may underflow
            (broadcastable); 0 when only the output itself may.
        rounding: the store's rounding; ``None`` means ``kernel_store_rounding(actual.dtype)``.

    Returns:
        ``RoundingStats``: the largest error in ulps and the share beyond half an ulp.

    Raises:
        AssertionError: on a shape mismatch, NaN/Inf in ``actual``, or any element further from
            ``expected`` than its rounding allows, give or take the fp32 allowance: half an ulp
            either side when rounding to nearest; between 0 and one ulp toward zero when
            truncating.
    """
    if actual.dtype not in _LOW_PRECISION:
        raise ValueError(f"assert_correctly_rounded checks fp16 and bf16 outputs, got {actual.dtype}")
    if actual.shape != expected.shape:
        raise AssertionError(f"shape {tuple(actual.shape)} != expected {tuple(expected.shape)}")
    want = expected.detach().to(torch.float64)
    if not torch.isfinite(want).all():
        raise AssertionError("reference contains NaN/Inf; the test inputs are invalid")
    got = actual.detach().to(torch.float64)
    non_finite = ~torch.isfinite(got)
    if non_finite.any():
        first = tuple(int(i) for i in non_finite.nonzero()[0])
        raise AssertionError(f"{int(non_finite.sum())} of {actual.numel()} output elements are NaN/Inf "
                             f"(first at {first}: {got[first].item()})")
    if actual.numel() == 0:
        return RoundingStats(0.0, 0.0)

    mode = kernel_store_rounding(actual.dtype) if rounding is None else rounding
    magnitude = want.abs() if terms is None else terms.detach().to(torch.float64).abs().expand_as(want)
    fp32 = torch.finfo(torch.float32)
    scale = underflow_scale.detach().to(torch.float64).abs() if isinstance(underflow_scale, torch.Tensor) \
        else abs(underflow_scale)
    allowance = fp32_ulps * fp32.eps * magnitude + fp32.tiny * (1 + scale)
    step = ulp(want, actual.dtype)
    if mode == "nearest":
        # Signed distance past the half-ulp bound on either side.
        excess = (got - want).abs() - (0.5 * step + allowance)
    else:
        # Toward zero: |actual| may fall short of |expected| by less than one ulp, never exceed it.
        shortfall = want.abs() - got * want.sign() - torch.where(want == 0, got.abs(), 0.0)
        excess = torch.maximum(shortfall - (step + allowance), -shortfall - allowance)
    error_ulps = (got - want).abs() / step
    stats = RoundingStats(float(error_ulps.max()), float((error_ulps > 0.5).double().mean()))
    if (excess > 0).any():
        worst = tuple(int(i) for i in torch.unravel_index(excess.argmax(), excess.shape))
        bound = "half an ulp" if mode == "nearest" else "one ulp toward zero"
        raise AssertionError(
            f"{int((excess > 0).sum())} of {actual.numel()} elements are not the correctly rounded "
            f"{dtype_name(actual.dtype)} value (rounded {mode.replace('_', ' ')}: within {bound} plus "
            f"{fp32_ulps:g} fp32 ulps of the terms); worst at {worst}: got {got[worst].item():.9g}, "
            f"exact {want[worst].item():.9g}, {error_ulps[worst].item():.3g} ulps off; "
            f"{stats.beyond_half_ulp:.1%} of elements beyond half an ulp"
        )
    return stats


def record_rounding(record_property: Callable[[str, object], None], stats: RoundingStats, prefix: str = "") -> None:
    """Record ``stats`` as the JUnit properties ``<prefix>beyond_half_ulp`` and ``<prefix>max_err_ulps``."""
    record_property(f"{prefix}beyond_half_ulp", stats.beyond_half_ulp)
    record_property(f"{prefix}max_err_ulps", stats.max_ulps)
