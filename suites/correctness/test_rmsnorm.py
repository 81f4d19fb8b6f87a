"""Triton RMSNorm, forward and backward, against an fp64 torch reference.

Each case poisons the outputs (``y`` and ``dx``) with NaN before the calls, so an element the
kernels never write fails, and checks that ``x``, ``weight`` and ``grad_out`` are left
untouched. The forward must meet the per-dtype bound; the gradients, whose error grows with
the row and (for ``dweight``) with the number of rows, are held to ``K`` times the error of
torch's own same-dtype RMSNorm on the same inputs. Errors are recorded as junit properties
(``max_abs_err`` / ``max_rel_err`` for ``y``, ``dx_*`` and ``dw_*`` for the gradients) so
roofwatch can chart numerical drift.

fp16 and bf16 outputs are also held to correct rounding (``assert_correctly_rounded``): each
is computed in fp32 and rounded once, so a kernel that casts before multiplying by the weight
(as ``weight * x.to(dtype)`` in many model files does) fails; the share of elements beyond half
an ulp is recorded as ``beyond_half_ulp`` (``dx_`` and ``dw_`` prefixed for the gradients).
Every tensor of a call is tried in a layout of its own (``layout_cases``), and short rows,
tiny and constant rows expose each term: the weight, eps, and the mean's 1 / n.
"""

import inspect
import math
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from kernels.rmsnorm import (
    CPU_BACKWARD_PROGRAMS,
    LOOPED_BLOCK,
    MAX_FUSED_COLS,
    backward_slots,
    rmsnorm,
    rmsnorm_backward,
    rmsnorm_forward,
    rmsnorm_reference,
)
from roofwatch.checks import IGNORE_RECORD_PROPERTY_WARNING, randn, record_errors
from roofwatch.exposure import assert_exposes
from roofwatch.layouts import LayoutCase, layout_cases, place
from roofwatch.rounding import assert_correctly_rounded, record_rounding
from roofwatch.tolerances import (
    ErrorStats,
    assert_close,
    assert_within_torch_error,
    dtype_name,
    tolerance_for,
)

# pytest's default junit family (xunit2) has no per-test <properties> in its schema and warns
# on record_property, yet still writes them; roofwatch reads them from there, so the warning
# says nothing useful on every case.
pytestmark = IGNORE_RECORD_PROPERTY_WARNING

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
EPS = 1e-6

# Odd shapes on purpose: a single element, one row, rows shorter than any block, non-powers of
# two, and row counts that do not divide evenly among the backward's programs (on CPU there are
# CPU_BACKWARD_PROGRAMS of them), so the last program gets fewer rows.
SHAPES: list[tuple[int, int]] = [(1, 1), (1, 300), (5, 7), (7, 1000), (10, 128)]
assert any(rows % CPU_BACKWARD_PROGRAMS and rows > CPU_BACKWARD_PROGRAMS for rows, _ in SHAPES)
# A row past the single-block cap, ending mid-block, for the streamed kernels. The interpreter
# runs it slowly, so it gets two rows and one seed.
LONG_SHAPE = (2, MAX_FUSED_COLS + 808)
assert LONG_SHAPE[1] % LOOPED_BLOCK

# Enough rows that each program of the backward gets two or three (on CPU 9, on an H200 265).
ROWS_SHARING_A_PROGRAM = 2 * backward_slots(torch.device(DEVICE)) + 1

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SEEDS = [0, 1]

# The gradients may be at most K times as far from fp64 as torch's own same-dtype backward
# (F.rms_norm with autograd, which also accumulates in fp32 and rounds once). Two effects
# separate the kernel from torch when both are correct: fp32 sums taken in a different order
# (a few fp32 ulps, invisible next to a bf16/fp16 rounding), and, on CPU, the Triton
# interpreter truncating fp32 -> bf16 where torch rounds to nearest, which alone doubles the
# largest rounding error (1 ulp against 0.5). K = 3 covers that doubling with room for the
# sample-to-sample spread of torch's own maximum, yet a wrong term in dx (a missing mean, a
# dropped eps, a mis-scaled rstd) is off by far more than 3x. Over seeds 2-7 of every case in
# this file on CPU, the largest share of the bound (floor included) any check used was
# 71 %; on a GPU, which rounds to nearest as torch does, the truncation's doubling is gone.
# Torch can also be exact by luck (one element, a gradient whose terms cancel), so the bound
# has a floor: what any correct implementation that computes in fp32 and rounds once may be
# off by. That is one ulp of the output dtype at the largest reference value (the rounding; a
# truncation on CPU), plus FP32_ULPS fp32 roundings of the largest term that cancels inside
# the result. The terms are the formula evaluated on absolute values (the usual forward error
# bound, Higham, "Accuracy and Stability of Numerical Algorithms", ch. 3).
K = 3.0
FP32_ULPS = 4.0


def _fp32_depth(rows: int, cols: int) -> int:
    """fp32 roundings an fp16/bf16 output may carry before its one store, in ulps of its terms.

    A row's sums are lane-wise partial sums (one term per streamed block) reduced by a tree:
    ``cols / LOOPED_BLOCK + log2(cols)`` roundings deep. rsqrt, the products and (for dx) the
    second sum add a few more, each approximate on a GPU; dweight adds one per row.
    """
    return 16 + math.ceil(math.log2(cols + 1)) + cols // LOOPED_BLOCK + rows


InputMaker = Callable[[tuple[int, int], torch.dtype, torch.Generator], torch.Tensor]


def _large(shape: tuple[int, int], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    # Squares near 1e8 overflow fp16 (max 65504) unless the sum is taken in fp32. fp16 itself
    # holds 1e4 only up to ~6 sigma, so it gets 1e3; fp32 and bf16 share fp32's range.
    scale = 1e3 if dtype == torch.float16 else 1e4
    return (torch.randn(shape, generator=gen) * scale).to(dtype)


def _tiny(shape: tuple[int, int], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    # A mean square near 1e-8, well under EPS: the result depends on eps being added, and in
    # fp16 many inputs are subnormal.
    return (torch.randn(shape, generator=gen) * 1e-4).to(dtype)


def _special(shape: tuple[int, int], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    # Every third row is all zeros (only eps keeps rstd finite), and the rows after them have
    # one outlier that dominates their mean square, as activation outliers in LLMs do.
    x = torch.randn(shape, generator=gen)
    x[0::3] = 0.0
    x[1::3, shape[1] // 2] = 300.0
    return x.to(dtype)


DISTRIBUTIONS: dict[str, InputMaker] = {
    "randn": randn,
    "large": _large,
    "tiny": _tiny,
    "special": _special,
}


def _make_inputs(
    shape: tuple[int, int], dtype: torch.dtype, dist: str, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x, weight, grad_out)``; weight and grad_out are standard normal, signs included."""
    gen = torch.Generator().manual_seed(seed)
    x = DISTRIBUTIONS[dist](shape, dtype, gen)
    weight = torch.randn(shape[1], generator=gen).to(dtype)
    grad_out = torch.randn(shape, generator=gen).to(dtype)
    return x.to(DEVICE), weight.to(DEVICE), grad_out.to(DEVICE)


def _gradient_terms(x: torch.Tensor, weight: torch.Tensor, grad_out: torch.Tensor) -> dict[str, torch.Tensor]:
    """The fp64 gradient formulas evaluated on absolute values: the size of what cancels."""
    rstd = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)
    abs_xhat, abs_wg = x.abs() * rstd, (weight * grad_out).abs()
    return {
        "dx": rstd * (abs_wg + abs_xhat * (abs_wg * abs_xhat).mean(dim=-1, keepdim=True)),
        "dw": (grad_out.abs() * abs_xhat).sum(dim=0),
    }


def _within_torch(
    name: str, ours: torch.Tensor, theirs: torch.Tensor, want: torch.Tensor, terms: torch.Tensor
) -> ErrorStats:
    floor = (
        torch.finfo(ours.dtype).eps * float(want.abs().max())
        + FP32_ULPS * torch.finfo(torch.float32).eps * float(terms.max())
    )
    try:
        return assert_within_torch_error(ours, theirs, want, k=K, atol=floor)
    except AssertionError as exc:
        raise AssertionError(f"{name}: {exc}") from None


def _check(
    x: torch.Tensor,
    weight: torch.Tensor,
    grad_out: torch.Tensor,
    record_property: Callable[[str, object], None],
    out: torch.Tensor | None = None,
    dx: torch.Tensor | None = None,
) -> None:
    """Run forward and backward into NaN-poisoned outputs and check both against fp64."""
    out = torch.full_like(x, float("nan")) if out is None else out
    dx = torch.full_like(x, float("nan")) if dx is None else dx
    inputs_before = [t.clone() for t in (x, weight, grad_out)]

    y, rstd = rmsnorm_forward(x, weight, EPS, out=out)
    dx_result, dweight = rmsnorm_backward(grad_out, x, weight, rstd, dx=dx)

    assert y.data_ptr() == out.data_ptr(), "rmsnorm must write into the out= tensor"
    assert dx_result.data_ptr() == dx.data_ptr(), "rmsnorm_backward must write into the dx= tensor"
    for name, before, after in zip(("x", "weight", "grad_out"), inputs_before, (x, weight, grad_out)):
        assert torch.equal(after, before), f"rmsnorm modified its input {name}"

    x64 = x.to(torch.float64).requires_grad_()
    w64 = weight.to(torch.float64).requires_grad_()
    g64 = grad_out.to(torch.float64)
    expected = rmsnorm_reference(x64, w64, EPS)
    expected.backward(g64)
    terms = _gradient_terms(x64.detach(), w64.detach(), g64)

    x_torch = x.clone().requires_grad_()
    w_torch = weight.clone().requires_grad_()
    F.rms_norm(x_torch, x.shape[-1:], w_torch, EPS).backward(grad_out)

    errors = assert_close(out, expected.detach(), tolerance_for(x.dtype))
    record_errors(record_property, errors)
    for name, ours, theirs, want in (
        ("dx", dx, x_torch.grad, x64.grad),
        ("dw", dweight, w_torch.grad, w64.grad),
    ):
        grad_errors = _within_torch(name, ours, theirs, want, terms[name])
        record_errors(record_property, grad_errors, prefix=f"{name}_")

    if x.dtype != torch.float32:
        # y and dx are stored by the kernels; dweight's fp32 partials are summed and rounded
        # by torch on the host, which always rounds to nearest.
        depth = _fp32_depth(x.numel() // max(x.shape[-1], 1), x.shape[-1])
        record_rounding(record_property, assert_correctly_rounded(out, expected.detach(), fp32_ulps=depth))
        for name, ours, want, rounding in (("dx", dx, x64.grad, None), ("dw", dweight, w64.grad, "nearest")):
            try:
                stats = assert_correctly_rounded(ours, want, terms=terms[name], fp32_ulps=depth, rounding=rounding)
            except AssertionError as exc:
                raise AssertionError(f"{name}: {exc}") from None
            record_rounding(record_property, stats, prefix=f"{name}_")


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("dist", list(DISTRIBUTIONS))
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_rmsnorm(
    shape: tuple[int, int],
    dtype: torch.dtype,
    dist: str,
    seed: int,
    record_property: Callable[[str, object], None],
) -> None:
    _check(*_make_inputs(shape, dtype, dist, seed), record_property)


@pytest.mark.parametrize("dist", list(DISTRIBUTIONS))
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
def test_rmsnorm_long_row(
    dtype: torch.dtype, dist: str, record_property: Callable[[str, object], None]
) -> None:
    _check(*_make_inputs(LONG_SHAPE, dtype, dist, 0), record_property)


@pytest.mark.parametrize("cols", [1000, LONG_SHAPE[1]])
def test_rmsnorm_strided_rows_stay_in_bounds(
    cols: int, record_property: Callable[[str, object], None]
) -> None:
    # Views into wider buffers: row strides differ from the row length, and the poisoned
    # columns around the out and dx views must still be NaN afterwards, so no lane reads or
    # writes past its row; the weight is a strided view too. Every backward program gets several rows, so dweight is
    # accumulated across rows inside a program, in registers and, for long rows, in memory.
    rows = ROWS_SHARING_A_PROGRAM
    gen = torch.Generator().manual_seed(0)
    x = torch.randn((rows, cols + 9), generator=gen).to(DEVICE)[:, 4 : 4 + cols]
    grad_out = torch.randn((rows, cols + 5), generator=gen).to(DEVICE)[:, 1 : 1 + cols]
    weight = torch.randn(2 * cols, generator=gen).to(DEVICE)[::2]
    out_buffer = torch.full((rows, cols + 9), float("nan"), device=DEVICE)
    dx_buffer = torch.full((rows, cols + 9), float("nan"), device=DEVICE)

    _check(x, weight, grad_out, record_property, out=out_buffer[:, 4 : 4 + cols], dx=dx_buffer[:, 4 : 4 + cols])

    for buffer in (out_buffer, dx_buffer):
        assert buffer[:, :4].isnan().all() and buffer[:, 4 + cols :].isnan().all()


# Layouts as a test dimension (roofwatch.layouts): each tensor of the forward and backward in a
# layout of its own, so a kernel addressing one with another's row stride fails. Inputs take any
# layout (a non-unit column stride is copied first, the weight always is); out and dx need
# unit-stride rows, and other layouts are refused. One fused and one streamed row length, with
# enough rows that every backward program reads several.
LAYOUTS = {
    "x": ["contiguous", "padded", "transposed", "strided"],
    "weight": ["contiguous", "padded", "strided"],
    "grad_out": ["contiguous", "padded", "transposed", "strided"],
    "out": ["contiguous", "padded"],
    "dx": ["contiguous", "padded"],
}
REFUSED = {(name, layout): f"{name} must be contiguous along its last dimension"
           for name in ("out", "dx") for layout in ("transposed", "strided")}


@pytest.mark.parametrize("cols", [300, LONG_SHAPE[1]])
@pytest.mark.parametrize("case", layout_cases(LAYOUTS), ids=str)
def test_rmsnorm_layouts(case: LayoutCase, cols: int, record_property: Callable[[str, object], None]) -> None:
    rows = ROWS_SHARING_A_PROGRAM if cols <= MAX_FUSED_COLS else 3
    x, weight, grad_out = _make_inputs((rows, cols), torch.float16, "randn", 0)
    placed = {"x": case.input("x", x), "weight": case.input("weight", weight),
              "grad_out": case.input("grad_out", grad_out), "out": case.output("out", x), "dx": case.output("dx", x)}

    _check(placed["x"].tensor, placed["weight"].tensor, placed["grad_out"].tensor, record_property,
           out=placed["out"].tensor, dx=placed["dx"].tensor)

    for name, tensor in placed.items():
        tensor.assert_outside_intact(name)


@pytest.mark.parametrize(("tensor", "layout"), list(REFUSED), ids=str)
def test_rmsnorm_refuses_layouts_it_cannot_write(tensor: str, layout: str) -> None:
    x, weight, grad_out = _make_inputs((3, 40), torch.float32, "randn", 0)
    bad = place(torch.full_like(x, float("nan")), layout)
    with pytest.raises(ValueError, match=REFUSED[tensor, layout]):
        if tensor == "out":
            rmsnorm_forward(x, weight, EPS, out=bad.tensor)
        else:
            rmsnorm_backward(grad_out, x, weight, rmsnorm_forward(x, weight, EPS)[1], dx=bad.tensor)
    bad.assert_outside_intact(tensor)


# Sizes that expose every term (roofwatch.exposure): what a kernel with one term wrong would
# compute, each exposed by a case whose inputs make that term matter in every dtype. Long
# rows hide a mean over n - 1 (a 1e-3 change at n = 1000, under the fp16 bound); rows whose
# mean square is far above eps hide eps.
def _variant(x: torch.Tensor, weight: torch.Tensor, eps: float, *, n_offset: int = 0, eps_outside: bool = False,
             weight_offset: float = 0.0) -> torch.Tensor:
    x64, w64 = x.double(), weight.double() + weight_offset
    mean_square = x64.pow(2).sum(dim=-1, keepdim=True) / (x.shape[-1] + n_offset)
    scale = 1 / (mean_square.sqrt() + eps) if eps_outside else torch.rsqrt(mean_square + eps)
    return x64 * scale * w64


ALTERNATIVES: dict[str, tuple[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]] = {
    # name: (the parameter whose term it gets wrong, what it computes)
    "mean over n - 1": ("x", lambda x, w: _variant(x, w, EPS, n_offset=-1)),
    "mean over n + 1 (a padding lane counted)": ("x", lambda x, w: _variant(x, w, EPS, n_offset=1)),
    "weight ignored": ("weight", lambda x, w: _variant(x, torch.ones_like(w), EPS)),
    "weight as 1 + w": ("weight", lambda x, w: _variant(x, w, EPS, weight_offset=1.0)),
    "eps dropped": ("eps", lambda x, w: _variant(x, w, 0.0)),
    "eps outside the root": ("eps", lambda x, w: _variant(x, w, EPS, eps_outside=True)),
}


def _constant_rows(shape: tuple[int, int], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    # Each row one value, some of them small next to sqrt(eps): y = w * c / sqrt(c**2 + eps),
    # which only the right eps gives.
    values = torch.tensor([2.0**-11, -(2.0**-10), 2.0**-9, 0.5, -3.0])
    return values[torch.arange(shape[0]) % len(values), None].expand(shape).to(dtype)


EXPOSING_CASES: dict[str, tuple[tuple[int, int], InputMaker, list[str]]] = {
    "short-rows": ((5, 7), randn, ["mean over n - 1", "mean over n + 1 (a padding lane counted)", "weight ignored",
                                   "weight as 1 + w"]),
    "constant-rows": ((5, 7), _constant_rows, ["eps dropped", "eps outside the root", "weight ignored"]),
}


def test_every_parameter_has_a_term_exposed() -> None:
    parameters = set(inspect.signature(rmsnorm_forward).parameters) - {"out"}
    exposed = {ALTERNATIVES[name][0] for _, _, names in EXPOSING_CASES.values() for name in names}
    assert exposed == parameters


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("case", list(EXPOSING_CASES))
def test_rmsnorm_exposes_every_term(case: str, dtype: torch.dtype, record_property: Callable[[str, object], None]
                                    ) -> None:
    shape, make, names = EXPOSING_CASES[case]
    gen = torch.Generator().manual_seed(0)
    x = make(shape, dtype, gen).to(DEVICE)
    weight = torch.randn(shape[1], generator=gen).to(dtype=dtype, device=DEVICE)

    y, _ = rmsnorm_forward(x, weight, EPS)

    expected = _variant(x, weight, EPS)
    assert_exposes(expected, {name: ALTERNATIVES[name][1](x, weight) for name in names}, tolerance_for(dtype))
    record_errors(record_property, assert_close(y, expected, tolerance_for(dtype)))


@pytest.mark.parametrize("shape", [(2, 3, 100), (3, LONG_SHAPE[1])], ids=lambda s: "x".join(map(str, s)))
def test_rmsnorm_autograd_matches_the_kernels(shape: tuple[int, ...]) -> None:
    # rmsnorm(x, w).backward(g) runs the same kernels as the explicit calls, on any leading
    # dimensions; sum().backward() hands the backward a stride-0 (expanded) grad_out.
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=gen).to(DEVICE)
    weight = torch.randn(shape[-1], generator=gen).to(DEVICE)
    y, rstd = rmsnorm_forward(x, weight, EPS)
    dx, dweight = rmsnorm_backward(torch.ones_like(x), x, weight, rstd)

    x_leaf, w_leaf = x.clone().requires_grad_(), weight.clone().requires_grad_()
    y_auto = rmsnorm(x_leaf, w_leaf, EPS)
    y_auto.sum().backward()

    assert y_auto.shape == x.shape and torch.equal(y_auto.detach(), y)
    assert torch.equal(x_leaf.grad, dx) and torch.equal(w_leaf.grad, dweight)


@pytest.mark.parametrize(
    "shape", [(ROWS_SHARING_A_PROGRAM, 300), (3, LONG_SHAPE[1])], ids=lambda s: f"{s[0]}x{s[1]}"
)
def test_rmsnorm_is_deterministic(shape: tuple[int, int]) -> None:
    # The forward reduces each row inside one program, and the backward's dweight partials are
    # written without atomics and summed by torch in a fixed order: for one device and shape,
    # every output is bit-for-bit the same from call to call.
    x, weight, grad_out = _make_inputs(shape, torch.bfloat16, "randn", 0)
    first_y, first_rstd = rmsnorm_forward(x, weight, EPS)
    first_grads = rmsnorm_backward(grad_out, x, weight, first_rstd)
    second_y, second_rstd = rmsnorm_forward(x, weight, EPS)
    second_grads = rmsnorm_backward(grad_out, x, weight, second_rstd)

    assert torch.equal(first_y, second_y) and torch.equal(first_rstd, second_rstd)
    assert all(torch.equal(a, b) for a, b in zip(first_grads, second_grads))


@pytest.mark.parametrize("shape", [(0, 5), (4, 0)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_rmsnorm_empty(shape: tuple[int, int]) -> None:
    x = torch.empty(shape, device=DEVICE)
    weight = torch.ones(shape[1], device=DEVICE)
    y, rstd = rmsnorm_forward(x, weight)
    dx, dweight = rmsnorm_backward(torch.empty_like(x), x, weight, rstd)
    assert y.shape == dx.shape == shape and dweight.shape == (shape[1],)
    assert not dweight.any()


def test_rmsnorm_rejects_bad_arguments() -> None:
    x = torch.randn((2, 3), device=DEVICE)
    weight = torch.ones(3, device=DEVICE)
    with pytest.raises(TypeError):
        rmsnorm(x.double(), weight.double())
    with pytest.raises(ValueError, match="weight must be"):
        rmsnorm(x, torch.ones(4, device=DEVICE))
    with pytest.raises(ValueError, match="weight must be"):
        rmsnorm(x, weight.half())
    with pytest.raises(ValueError, match="out must match"):
        rmsnorm(x, weight, out=torch.empty((3, 2), device=DEVICE))
    with pytest.raises(ValueError, match="rstd must be"):
        rmsnorm_backward(x, x, weight, torch.ones(2, dtype=torch.float16, device=DEVICE))
    with pytest.raises(ValueError, match="does not support autograd"):
        rmsnorm(x.requires_grad_(), weight, out=torch.empty_like(x))
