"""Correctness checks for kernel suites: the public API, importable wherever roofwatch is installed.

Compare a kernel's output with an fp64 reference, under a per-dtype bound or relative to
torch's own error on the same inputs, and record the errors so roofwatch stores them per test::

    from roofwatch.testing import assert_close, record_errors, tolerance_for

    def test_scale(record_property):
        x = torch.randn(1000, dtype=torch.float16)
        errors = assert_close(scale(x, 3.0), 3.0 * x.double(), tolerance_for(torch.float16))
        record_errors(record_property, errors)

Outputs poisoned with NaN (``poisoned_output``) show elements a kernel never wrote; buffers with
a guard after them (``guarded``, ``assert_guard_intact``) show lanes that ran past the end.
NaN or Inf in an output always fails.

Three checks aim at bugs that pass per-dtype tolerances:

- ``layout_cases`` / ``LayoutCase`` (``roofwatch.layouts``): the same logical tensors, each in a
  physical layout of its own (padded, permuted, transposed, strided views), so a kernel that
  addresses one tensor with another's stride fails.
- ``assert_correctly_rounded`` (``roofwatch.rounding``): an fp16/bf16 output computed in fp32
  must be the exact result rounded once, within half an ulp plus fp32's own error, so a kernel
  that rounds before its last scale fails; ``record_rounding`` stores the share beyond half an
  ulp.
- ``assert_exposes`` (``roofwatch.exposure``): a case's inputs must tell each plausible wrong
  term (an eps dropped, a mean over n - 1, eps / (V - 1)) from the right result.
"""

from roofwatch.checks import (
    GUARD,
    INPUT_CANARY,
    assert_guard_intact,
    guarded,
    large,
    poisoned_output,
    randn,
    record_errors,
    shape_id,
)
from roofwatch.exposure import assert_exposes
from roofwatch.layouts import LAYOUTS, LayoutCase, Placed, layout_cases, place
from roofwatch.rounding import (
    RoundingStats,
    assert_correctly_rounded,
    kernel_store_rounding,
    record_rounding,
    round_once,
    ulp,
)
from roofwatch.tolerances import (
    ErrorStats,
    Tolerance,
    assert_close,
    assert_within_torch_error,
    dtype_name,
    error_stats,
    tolerance_for,
)

__all__ = [
    "GUARD",
    "INPUT_CANARY",
    "LAYOUTS",
    "ErrorStats",
    "LayoutCase",
    "Placed",
    "RoundingStats",
    "Tolerance",
    "assert_close",
    "assert_correctly_rounded",
    "assert_exposes",
    "assert_guard_intact",
    "assert_within_torch_error",
    "dtype_name",
    "error_stats",
    "guarded",
    "kernel_store_rounding",
    "large",
    "layout_cases",
    "place",
    "poisoned_output",
    "randn",
    "record_errors",
    "record_rounding",
    "round_once",
    "shape_id",
    "tolerance_for",
    "ulp",
]
