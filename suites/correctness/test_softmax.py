"""Triton softmax against an fp64 torch reference.

Each case poisons the output with NaN before the call (so an element the kernel never writes
fails), checks the input is left untouched, and records the measured error as junit
properties ``max_abs_err`` / ``max_rel_err`` so roofwatch can chart numerical drift.
"""

from collections.abc import Callable

import pytest
import torch

from kernels.softmax import LOOPED_BLOCK, MAX_FUSED_COLS, softmax, softmax_reference
from roofwatch.checks import IGNORE_RECORD_PROPERTY_WARNING, randn, record_errors
from roofwatch.tolerances import assert_close, dtype_name, tolerance_for

# pytest's default junit family (xunit2) has no per-test <properties> in its schema and warns
# on record_property, yet still writes them; roofwatch reads them from there, so the warning
# says nothing useful on every case.
pytestmark = IGNORE_RECORD_PROPERTY_WARNING

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

# Odd shapes on purpose: a single element, rows shorter than any block, non-powers of two,
# one column past a power of two, and rows long enough for the streamed kernel, ending mid-block.
SHAPES: list[tuple[int, int]] = [(1, 1), (1, 7), (3, 1000), (64, 128), (17, 4097), (2, 10_000)]
assert any(cols > MAX_FUSED_COLS and cols % LOOPED_BLOCK for _, cols in SHAPES)

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SEEDS = [0, 1]


InputMaker = Callable[[tuple[int, int], torch.dtype, torch.Generator], torch.Tensor]


def _large(shape: tuple[int, int], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    # Magnitudes near 1e4 overflow exp() unless the row max is subtracted first; the clamp
    # keeps fp16 (max 65504) from turning a 6-sigma draw into an input Inf.
    x = torch.randn(shape, generator=gen, dtype=torch.float32) * 1e4
    limit = torch.finfo(dtype).max
    return x.clamp(-limit, limit).to(dtype)


def _masked(shape: tuple[int, int], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    # Attention-style masks: about half of each row is -inf. The last column stays finite so
    # the reference is defined, and row 0 is -inf everywhere else, so a streamed kernel sees
    # whole blocks of -inf before its first finite value.
    x = torch.randn(shape, generator=gen, dtype=torch.float32)
    masked = torch.rand(shape, generator=gen) < 0.5
    masked[0, :] = True
    masked[:, -1] = False
    return x.masked_fill(masked, float("-inf")).to(dtype)


DISTRIBUTIONS: dict[str, InputMaker] = {
    "randn": randn,
    "large": _large,
    "masked": _masked,
}


def _make_input(shape: tuple[int, int], dtype: torch.dtype, dist: str, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return DISTRIBUTIONS[dist](shape, dtype, gen).to(DEVICE)


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("dist", list(DISTRIBUTIONS))
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_softmax(
    shape: tuple[int, int],
    dtype: torch.dtype,
    dist: str,
    seed: int,
    record_property: Callable[[str, object], None],
) -> None:
    x = _make_input(shape, dtype, dist, seed)
    x_before = x.clone()
    out = torch.full_like(x, float("nan"))

    result = softmax(x, out=out)

    assert result.data_ptr() == out.data_ptr(), "softmax must write into the out= tensor"
    assert torch.equal(x, x_before), "softmax modified its input"
    errors = assert_close(out, softmax_reference(x, torch.float64), tolerance_for(dtype))
    record_errors(record_property, errors)


@pytest.mark.parametrize("cols", [1000, 10_000])
def test_softmax_strided_rows_stay_in_bounds(
    cols: int, record_property: Callable[[str, object], None]
) -> None:
    # Views into wider buffers: the row stride differs from the row length, and the poisoned
    # columns around each view must still be NaN afterwards, so no lane reads or writes
    # past its row.
    gen = torch.Generator().manual_seed(0)
    x_buffer = torch.randn((3, cols + 9), generator=gen).to(DEVICE)
    out_buffer = torch.full((3, cols + 9), float("nan"), device=DEVICE)
    x = x_buffer[:, 4 : 4 + cols]
    out = out_buffer[:, 4 : 4 + cols]

    softmax(x, out=out)

    errors = assert_close(out, softmax_reference(x, torch.float64), tolerance_for(x.dtype))
    assert out_buffer[:, :4].isnan().all() and out_buffer[:, 4 + cols :].isnan().all()
    record_errors(record_property, errors)


def test_softmax_transposed_input() -> None:
    # A column-major input is copied to row-major before launch rather than misread.
    x = torch.randn((40, 3), generator=torch.Generator().manual_seed(0)).to(DEVICE).t()
    assert_close(softmax(x), softmax_reference(x, torch.float64), tolerance_for(x.dtype))


@pytest.mark.parametrize("shape", [(0, 5), (4, 0)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_softmax_empty(shape: tuple[int, int]) -> None:
    assert softmax(torch.empty(shape, device=DEVICE)).shape == shape


def test_softmax_rejects_bad_arguments() -> None:
    x = torch.randn((2, 3), device=DEVICE)
    with pytest.raises(ValueError, match="2-D"):
        softmax(x[None])
    with pytest.raises(TypeError):
        softmax(x.to(torch.float64))
    with pytest.raises(ValueError, match="out must match"):
        softmax(x, out=torch.empty((3, 2), device=DEVICE))
    with pytest.raises(ValueError, match="out must match"):
        softmax(x, out=torch.empty((2, 3), dtype=torch.float16, device=DEVICE))
