"""Per-dtype tolerances and the error measure every correctness test reports.

A test compares a kernel's output with an fp64 reference and records the largest absolute
and relative error, so numerical drift across commits shows up as a trend, not only when a
bound is crossed. NaN or Inf in an output is always a failure: no tolerance excuses it.
"""

from dataclasses import dataclass
from typing import NamedTuple

import torch

__all__ = ["DTYPE_NAMES", "ErrorStats", "Tolerance", "assert_close", "assert_within_torch_error", "dtype_name",
           "error_stats", "tolerance_for"]


@dataclass(frozen=True)
class Tolerance:
    """Element-wise bound ``|actual - expected| <= atol + rtol * |expected|``."""

    atol: float
    rtol: float


class ErrorStats(NamedTuple):
    """Largest errors over all elements; ``max_rel`` is unitless, ``max_abs`` in output units."""

    max_abs: float
    max_rel: float


# Output rounding alone costs half an ulp relative (fp16 2**-11, bf16 2**-8); the rtols leave
# room for fp32 accumulation and for truncating stores (Triton's interpreter truncates
# fp32 -> bf16). These match torch.testing's defaults for the same dtypes.
_TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float32: Tolerance(atol=1e-5, rtol=1.3e-6),
    torch.float16: Tolerance(atol=1e-5, rtol=1e-3),
    torch.bfloat16: Tolerance(atol=1e-5, rtol=1.6e-2),
}

DTYPE_NAMES: dict[torch.dtype, str] = {
    torch.float32: "fp32",
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.float64: "fp64",
}


def tolerance_for(dtype: torch.dtype) -> Tolerance:
    """The bound a kernel's ``dtype`` output must meet against an fp64 reference."""
    try:
        return _TOLERANCES[dtype]
    except KeyError:
        raise ValueError(f"no tolerance defined for {dtype}") from None


def dtype_name(dtype: torch.dtype) -> str:
    """Short name used in test ids and benchmark ``extra_info``: ``fp32``, ``fp16``, ``bf16``."""
    return DTYPE_NAMES[dtype]


def _require_judgeable(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Same shape, a finite reference, and no NaN/Inf in the output (which no bound excuses)."""
    if actual.shape != expected.shape:
        raise AssertionError(f"shape {tuple(actual.shape)} != expected {tuple(expected.shape)}")
    if not torch.isfinite(expected).all():
        raise AssertionError("reference contains NaN/Inf; the test inputs are invalid")
    non_finite = ~torch.isfinite(actual)
    if non_finite.any():
        first = tuple(int(i) for i in non_finite.nonzero()[0])
        raise AssertionError(
            f"{int(non_finite.sum())} of {actual.numel()} output elements are NaN/Inf "
            f"(first at {first}: {actual[first].item()})"
        )


def assert_close(actual: torch.Tensor, expected: torch.Tensor, tolerance: Tolerance) -> ErrorStats:
    """Check ``actual`` against ``expected`` element-wise and return the errors measured.

    Args:
        actual: kernel output, any floating dtype.
        expected: reference of the same shape, ideally fp64; it must be finite, since a
            non-finite reference means the test chose inputs it cannot judge.
        tolerance: the bound each element must meet.

    Returns:
        ``ErrorStats``. The relative error divides by ``max(|expected|, tiny)``, ``tiny`` being
        the smallest normal of ``actual.dtype``: below it the dtype has no relative precision
        to lose, so an underflow to zero is not reported as a 100 % error.

    Raises:
        AssertionError: on a shape mismatch, any NaN/Inf in ``actual``, or a bound exceeded.
    """
    _require_judgeable(actual, expected)
    if actual.numel() == 0:
        return ErrorStats(0.0, 0.0)

    got = actual.to(torch.float64)
    want = expected.to(torch.float64)
    abs_err = (got - want).abs()
    rel_err = abs_err / want.abs().clamp_min(torch.finfo(actual.dtype).tiny)
    stats = ErrorStats(float(abs_err.max()), float(rel_err.max()))

    excess = abs_err - (tolerance.atol + tolerance.rtol * want.abs())
    if (excess > 0).any():
        worst = tuple(int(i) for i in torch.unravel_index(excess.argmax(), excess.shape))
        raise AssertionError(
            f"{int((excess > 0).sum())} of {actual.numel()} elements exceed "
            f"atol={tolerance.atol:g} rtol={tolerance.rtol:g}; worst at {worst}: "
            f"got {got[worst].item():.9g}, expected {want[worst].item():.9g} "
            f"(max abs err {stats.max_abs:.3g}, max rel err {stats.max_rel:.3g})"
        )
    return stats


def error_stats(actual: torch.Tensor, expected: torch.Tensor) -> ErrorStats:
    """Largest absolute and relative error of ``actual`` against ``expected`` (no bound)."""
    if actual.numel() == 0:
        return ErrorStats(0.0, 0.0)
    got, want = actual.to(torch.float64), expected.to(torch.float64)
    abs_err = (got - want).abs()
    rel_err = abs_err / want.abs().clamp_min(torch.finfo(actual.dtype).tiny)
    return ErrorStats(float(abs_err.max()), float(rel_err.max()))


def assert_within_torch_error(actual: torch.Tensor, torch_result: torch.Tensor, expected: torch.Tensor,
                              k: float = 2.0, atol: float = 1e-5) -> ErrorStats:
    """``actual`` may be at most ``k`` times as far from ``expected`` as torch's own result.

    For ops whose error grows with the problem (long reductions, matmuls, attention) a fixed
    per-dtype bound is either loose or flaky; torch's same-dtype implementation, checked
    against the same fp64 reference, measures what the dtype allows for these very inputs.
    ``atol`` is a floor for cases where torch happens to be exact. NaN/Inf always fail.

    Returns the kernel's ``ErrorStats``.
    """
    _require_judgeable(actual, expected)
    ours, theirs = error_stats(actual, expected), error_stats(torch_result, expected)
    bound = k * theirs.max_abs + atol
    if ours.max_abs > bound:
        raise AssertionError(
            f"max abs err {ours.max_abs:.3g} exceeds {k:g} x torch's {theirs.max_abs:.3g} + {atol:g} "
            f"(max rel err {ours.max_rel:.3g})"
        )
    return ours
