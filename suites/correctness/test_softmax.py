"""Triton softmax against an fp64 torch reference.

Each case poisons the output with NaN before the call (so an element the kernel never writes
fails), checks the input is left untouched, and records the measured error as junit
properties ``max_abs_err`` / ``max_rel_err`` so roofwatch can chart numerical drift. fp16 and
bf16 outputs must also be correctly rounded (``assert_correctly_rounded``: the fp32 result
rounded once), with the share of elements beyond half an ulp recorded as ``beyond_half_ulp``.
x and out are tried in layouts of their own (``layout_cases``), and rows must sum to one.
"""

from collections.abc import Callable

import pytest
import torch

from kernels.softmax import LOOPED_BLOCK, MAX_FUSED_COLS, softmax, softmax_reference
from roofwatch.checks import IGNORE_RECORD_PROPERTY_WARNING, randn, record_errors
from roofwatch.layouts import LayoutCase, layout_cases, place
from roofwatch.rounding import assert_correctly_rounded, kernel_store_rounding, record_rounding, ulp
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

# The fp32 error allowed before the fp16/bf16 store, in fp32 ulps of the output: exp(x - max)
# errs by about |x - max| ulps (its argument's rounding; outputs that survive rounding to fp16
# have |x - max| < 30), the normalizer's sum by its depth (log2 of a block, plus one per
# streamed block), the divide by one or two (approximate on a GPU).
FP32_ULPS = 64


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
    expected = softmax_reference(x, torch.float64)
    errors = assert_close(out, expected, tolerance_for(dtype))
    record_errors(record_property, errors)
    if dtype != torch.float32:
        record_rounding(record_property, assert_correctly_rounded(out, expected, fp32_ulps=FP32_ULPS))


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


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("shape", [(3, 1000), (2, MAX_FUSED_COLS + 100)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_softmax_rows_sum_to_one(shape: tuple[int, int], dtype: torch.dtype) -> None:
    # A property that needs no reference: each row's sum is one, up to the rounding of each
    # element (half an ulp, a whole one where the store truncates) and fp32's own error.
    x = _make_input(shape, dtype, "randn", 0)
    out = softmax(x).double()
    if dtype == torch.float32:
        per_element = FP32_ULPS * torch.finfo(torch.float32).eps * out
    else:
        share = 0.5 if kernel_store_rounding(dtype) == "nearest" else 1.0
        per_element = share * ulp(out, dtype) + FP32_ULPS * torch.finfo(torch.float32).eps * out
    error = (out.sum(dim=-1) - 1).abs()
    bound = per_element.sum(dim=-1)
    assert (error <= bound).all(), f"row sums are off by up to {float(error.max()):.3g} (bound {float(bound.max()):.3g})"


# Layouts as a test dimension (roofwatch.layouts): x and out each in a layout of its own, at a
# fused and a streamed row length, so a kernel reading x with out's row stride (or writing out
# with x's) fails. x may take any layout (a non-unit column stride is copied first); out must
# have unit-stride rows and any other layout is refused.
LAYOUTS = {"x": ["contiguous", "padded", "transposed", "strided"], "out": ["contiguous", "padded"]}
REFUSED = {("out", "transposed"): "out must be contiguous along its last dimension",
           ("out", "strided"): "out must be contiguous along its last dimension"}


@pytest.mark.parametrize("shape", [(7, 300), (3, MAX_FUSED_COLS + 100)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("case", layout_cases(LAYOUTS), ids=str)
def test_softmax_layouts(case: LayoutCase, shape: tuple[int, int], record_property: Callable[[str, object], None]
                         ) -> None:
    values = _make_input(shape, torch.float16, "randn", 0)
    x = case.input("x", values)
    out = case.output("out", values)

    softmax(x.tensor, out=out.tensor)

    out.assert_outside_intact("out")
    x.assert_outside_intact("x")
    expected = softmax_reference(values, torch.float64)
    record_errors(record_property, assert_close(out.tensor, expected, tolerance_for(torch.float16)))
    record_rounding(record_property, assert_correctly_rounded(out.tensor, expected, fp32_ulps=FP32_ULPS))


@pytest.mark.parametrize(("tensor", "layout"), list(REFUSED), ids=lambda v: str(v))
def test_softmax_refuses_layouts_it_cannot_write(tensor: str, layout: str) -> None:
    x = torch.randn((4, 40), device=DEVICE)
    out = place(torch.full_like(x, float("nan")), layout)
    with pytest.raises(ValueError, match=REFUSED[tensor, layout]):
        softmax(x, out=out.tensor)
    out.assert_outside_intact(tensor)


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
