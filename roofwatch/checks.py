"""What correctness suites share: seeded inputs, guarded and poisoned outputs, error recording.

Outputs are poisoned with NaN before a kernel runs, so an element it never writes shows as
NaN. A guarded buffer is followed in memory by ``GUARD`` elements of a canary: a lane that
runs past the end of an input reads the finite ``INPUT_CANARY``, and one that runs past the
end of an output overwrites its NaN canary, which the case then checks. Every case records
its largest errors as junit properties ``max_abs_err`` / ``max_rel_err``.
"""

from collections.abc import Callable

import pytest
import torch

from roofwatch.tolerances import ErrorStats

__all__ = ["GUARD", "IGNORE_RECORD_PROPERTY_WARNING", "INPUT_CANARY", "assert_guard_intact", "guarded", "large",
           "poisoned_output", "randn", "record_errors", "shape_id"]

# pytest warns that record_property is incompatible with some junit families; the suites
# record properties on purpose.
IGNORE_RECORD_PROPERTY_WARNING = pytest.mark.filterwarnings("ignore:record_property is incompatible")

GUARD = 64
INPUT_CANARY = 3.0


def randn(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Standard normal values drawn in fp32 from ``gen``, then rounded to ``dtype``."""
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)


def large(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Normal values with sigma a quarter of ``limit``, half ``dtype``'s max, drawn in fp64 and
    clamped to ``[-limit, limit]``, so no draw becomes an input Inf and a sum of two (or a
    rotation of a pair) stays finite."""
    limit = torch.finfo(dtype).max / 2
    x = torch.randn(shape, generator=gen, dtype=torch.float64) * limit / 4
    return x.clamp(-limit, limit).to(dtype)


def guarded(x: torch.Tensor, canary: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` copied into a contiguous buffer followed by ``GUARD`` elements of ``canary``;
    the copy and the guard."""
    buffer = torch.full((x.numel() + GUARD,), canary, dtype=x.dtype, device=x.device)
    inside = buffer[: x.numel()].view(x.shape)
    inside.copy_(x)
    return inside, buffer[x.numel() :]


def poisoned_output(like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """An all-NaN tensor shaped like ``like``, followed by a NaN guard; the tensor and the guard."""
    return guarded(torch.full_like(like, float("nan")), float("nan"))


def assert_guard_intact(guard: torch.Tensor, name: str) -> None:
    """Fail if the kernel overwrote the NaN canary after output ``name`` (see ``poisoned_output``)."""
    written = ~guard.isnan()
    if written.any():
        raise AssertionError(
            f"wrote past the end of {name}: {int(written.sum())} of the {GUARD} elements after it changed "
            f"(first {int(written.nonzero()[0])} past the end, now {guard[written][0].item()!r})"
        )


def record_errors(record_property: Callable[[str, object], None], errors: ErrorStats, prefix: str = "") -> None:
    """Record ``errors`` as the junit properties ``<prefix>max_abs_err`` and ``<prefix>max_rel_err``."""
    record_property(f"{prefix}max_abs_err", errors.max_abs)
    record_property(f"{prefix}max_rel_err", errors.max_rel)


def shape_id(shape: tuple[int, ...]) -> str:
    """A shape as it appears in test ids: ``3x5x7``."""
    return "x".join(map(str, shape))
