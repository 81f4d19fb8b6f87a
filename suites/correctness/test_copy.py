"""The bandwidth probes ``copy`` and ``add`` against torch.

``copy`` must reproduce every bit of its input, NaN payloads, -0.0 and subnormals included.
``add`` must be within the dtype's tolerance of an fp64 reference and bit-identical to
``torch.add`` wherever both round to nearest even (see ``_add_is_exact``). Outputs are
poisoned with NaN before each call and followed in memory by a canary that must survive it,
inputs are checked unchanged, and the measured error is recorded as junit properties
``max_abs_err`` / ``max_rel_err``. An fp16/bf16 sum must be correctly rounded
(``assert_correctly_rounded``, the share beyond half an ulp recorded as ``beyond_half_ulp``),
also under the interpreter, whose bf16 store truncates. The probes stream flat memory: every
tensor in any layout but a contiguous one is refused (``layout_cases`` names them).
"""

from collections.abc import Callable

import pytest
import torch

from kernels.copy import add, add_reference, block_elements, copy, copy_reference
from roofwatch.checks import (
    IGNORE_RECORD_PROPERTY_WARNING,
    INPUT_CANARY,
    assert_guard_intact,
    guarded,
    large,
    poisoned_output,
    randn,
    record_errors,
    shape_id,
)
from roofwatch.layouts import LAYOUTS, place
from roofwatch.rounding import assert_correctly_rounded, record_rounding
from roofwatch.tolerances import ErrorStats, assert_close, dtype_name, error_stats, tolerance_for

pytestmark = IGNORE_RECORD_PROPERTY_WARNING

ON_GPU = torch.cuda.is_available()
DEVICE = "cuda" if ON_GPU else "cpu"

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SEEDS = [0, 1]

# A single element, sizes shorter than a block, exactly one fp32 block (the unmasked path
# only), a 3-D tensor that is flattened, one element past the fp16/bf16 block (a full block,
# then a one-element tail), and several blocks ending mid-block for every dtype.
SHAPES: list[tuple[int, ...]] = [(1,), (7,), (4096,), (3, 5, 7), (8193,), (2, 10_000)]
assert any(torch.Size(s).numel() == block_elements(torch.float32) for s in SHAPES)
assert all(
    any(torch.Size(s).numel() > block_elements(dt) and torch.Size(s).numel() % block_elements(dt) for s in SHAPES)
    for dt in DTYPES
)

_BITS_DTYPE = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}

InputMaker = Callable[[tuple[int, ...], torch.dtype, torch.Generator], torch.Tensor]


def _special(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    # +-0, +-1, +-the smallest normal and +-the smallest subnormal, mixed: x + y then gives
    # signed zeros and subnormal sums, where a flush-to-zero or a wrong rounding shows.
    smallest_subnormal = torch.ones(1, dtype=_BITS_DTYPE[dtype]).view(dtype)
    positive = torch.cat([torch.tensor([0.0, 1.0, torch.finfo(dtype).tiny], dtype=dtype), smallest_subnormal])
    values = torch.cat([positive, -positive])
    return values[torch.randint(len(values), shape, generator=gen)]


def _bits(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    # Every bit pattern is fair game for a copy: NaNs with payloads, infinities, subnormals.
    int_dtype = _BITS_DTYPE[dtype]
    info = torch.iinfo(int_dtype)
    raw = torch.randint(info.min, info.max + 1, shape, generator=gen, dtype=torch.int64)
    return raw.to(int_dtype).view(dtype)


# large: half the dtype's max, so x + y of two such values stays finite.
COPY_DISTRIBUTIONS: dict[str, InputMaker] = {"randn": randn, "large": large, "special": _special, "bits": _bits}
ADD_DISTRIBUTIONS: dict[str, InputMaker] = {"randn": randn, "large": large, "special": _special}


# Every tensor a kernel reads or writes is followed by a canary (roofwatch.checks.guarded): a
# lane that runs past the end (an off-by-one mask) reads the input's finite canary and
# overwrites the output's NaN one, which each case then checks.
def _make_input(maker: InputMaker, shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    x = maker(shape, dtype, torch.Generator().manual_seed(seed)).to(DEVICE)
    return guarded(x, INPUT_CANARY)[0]


def _bits_of(t: torch.Tensor) -> torch.Tensor:
    return t.view(_BITS_DTYPE[t.dtype])


def _assert_bit_identical(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    differs = _bits_of(actual) != _bits_of(expected)
    if differs.any():
        first = tuple(int(i) for i in differs.nonzero()[0])
        raise AssertionError(
            f"{int(differs.sum())} of {actual.numel()} elements differ in their bits from {what} "
            f"(first at {first}: got {actual[first].item()!r}, expected {expected[first].item()!r})"
        )


def _finite_error(actual: torch.Tensor, expected: torch.Tensor) -> ErrorStats:
    finite = torch.isfinite(expected)
    return error_stats(actual[finite], expected[finite].to(torch.float64))


def _add_is_exact(dtype: torch.dtype) -> bool:
    # fp32 math rounded once is the correctly rounded fp16/bf16 sum, as torch computes it.
    # The interpreter converts fp32 -> bf16 by truncation, so bf16 is exact only compiled.
    return dtype != torch.bfloat16 or ON_GPU


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("dist", list(COPY_DISTRIBUTIONS))
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_copy(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    dist: str,
    seed: int,
    record_property: Callable[[str, object], None],
) -> None:
    x = _make_input(COPY_DISTRIBUTIONS[dist], shape, dtype, seed)
    x_before = x.clone()
    out, guard = poisoned_output(x)

    result = copy(x, out=out)

    assert result.data_ptr() == out.data_ptr(), "copy must write into the out= tensor"
    assert_guard_intact(guard, "out")
    _assert_bit_identical(x, x_before, "the input before the call (copy modified its input)")
    _assert_bit_identical(out, copy_reference(x), "the input")
    errors = _finite_error(out, x)
    record_errors(record_property, errors)


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("dist", list(ADD_DISTRIBUTIONS))
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_add(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    dist: str,
    seed: int,
    record_property: Callable[[str, object], None],
) -> None:
    x = _make_input(ADD_DISTRIBUTIONS[dist], shape, dtype, seed)
    y = _make_input(ADD_DISTRIBUTIONS[dist], shape, dtype, seed + 1000)
    x_before, y_before = x.clone(), y.clone()
    out, guard = poisoned_output(x)

    result = add(x, y, out=out)

    assert result.data_ptr() == out.data_ptr(), "add must write into the out= tensor"
    assert_guard_intact(guard, "out")
    assert torch.equal(x, x_before) and torch.equal(y, y_before), "add modified an input"
    expected = add_reference(x, y, torch.float64)
    errors = assert_close(out, expected, tolerance_for(dtype))
    if _add_is_exact(dtype):
        _assert_bit_identical(out, torch.add(x, y), "torch.add")
    record_errors(record_property, errors)
    if dtype != torch.float32:
        # One fp32 addition (exact unless the exponents lie far apart), then the store.
        record_rounding(record_property, assert_correctly_rounded(out, expected, fp32_ulps=1))


def test_probes_are_deterministic() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(10_000, generator=gen).to(DEVICE)
    y = torch.randn(10_000, generator=gen).to(DEVICE)
    _assert_bit_identical(copy(x), copy(x), "a second copy")
    _assert_bit_identical(add(x, y), add(x, y), "a second add")


def test_copy_rejects_non_contiguous_views() -> None:
    # A hidden .contiguous() would be a second copy and double the traffic the probe
    # reports, so a strided view is refused with a message that says what to do.
    base = torch.randn((64, 64), device=DEVICE)
    with pytest.raises(ValueError, match=r"x must be contiguous .*call \.contiguous\(\) first"):
        copy(base.t())
    with pytest.raises(ValueError, match="out must be contiguous"):
        copy(base, out=torch.empty_like(base).t())


def test_add_rejects_non_contiguous_views() -> None:
    base = torch.randn((64, 64), device=DEVICE)
    with pytest.raises(ValueError, match="x must be contiguous"):
        add(base[:, ::2], base[:, :32])
    with pytest.raises(ValueError, match="y must be contiguous"):
        add(base, base.t())
    with pytest.raises(ValueError, match="out must be contiguous"):
        add(base, base, out=torch.empty_like(base).t())


# Layouts as a test dimension (roofwatch.layouts): a copy behind the caller's back would double
# the traffic a probe reports, so each tensor in each layout other than contiguous is refused,
# with a message naming it; the contiguous layout is what every other case runs.
REFUSED = [(op, name, layout) for op, names in (("copy", ("x", "out")), ("add", ("x", "y", "out")))
           for name in names for layout in LAYOUTS if layout != "contiguous"]


@pytest.mark.parametrize(("op", "tensor", "layout"), REFUSED, ids=str)
def test_probes_refuse_every_layout_but_contiguous(op: str, tensor: str, layout: str) -> None:
    values = torch.randn((3, 4, 50), device=DEVICE)
    tensors = {"x": values, "y": values.clone(), "out": torch.full_like(values, float("nan"))}
    bad = place(tensors[tensor], layout, slot=1)
    tensors[tensor] = bad.tensor
    with pytest.raises(ValueError, match=f"{tensor} must be contiguous"):
        if op == "copy":
            copy(tensors["x"], out=tensors["out"])
        else:
            add(tensors["x"], tensors["y"], out=tensors["out"])
    bad.assert_outside_intact(tensor)


def test_probes_reject_bad_arguments() -> None:
    x = torch.randn(6, device=DEVICE)
    with pytest.raises(TypeError):
        copy(x.to(torch.float64))
    with pytest.raises(ValueError, match="y must match x"):
        add(x, torch.randn(7, device=DEVICE))
    with pytest.raises(ValueError, match="y must match x"):
        add(x, x.half())
    with pytest.raises(ValueError, match="out must match x"):
        copy(x, out=torch.empty(6, dtype=torch.float16, device=DEVICE))


def test_probes_on_empty_tensors() -> None:
    x = torch.empty((0, 3), device=DEVICE)
    assert copy(x).shape == (0, 3)
    assert add(x, x).shape == (0, 3)
