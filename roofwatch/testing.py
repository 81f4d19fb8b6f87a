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
    "ErrorStats",
    "Tolerance",
    "assert_close",
    "assert_guard_intact",
    "assert_within_torch_error",
    "dtype_name",
    "error_stats",
    "guarded",
    "large",
    "poisoned_output",
    "randn",
    "record_errors",
    "shape_id",
    "tolerance_for",
]
