"""Triton LayerNorm, forward and backward, against an fp64 torch reference.

Each case poisons the outputs (``y`` and ``dx``) with NaN before the calls, so an element the
kernels never write fails, and checks that ``x``, ``weight``, ``bias`` and ``grad_out`` are
left untouched. The forward must meet the per-dtype bound; the gradients, whose error grows
with the row and (for ``dweight`` and ``dbias``) with the number of rows, are held to ``K``
times the error of torch's own same-dtype LayerNorm on the same inputs. Errors are recorded
as junit properties (``max_abs_err`` / ``max_rel_err`` for ``y``; ``dx_*``, ``dw_*`` and
``db_*`` for the gradients) so roofwatch can chart numerical drift.

fp16 and bf16 outputs are also held to correct rounding (``assert_correctly_rounded``): each
is computed in fp32 and rounded once, so a kernel that casts before the weight and bias fails;
the share of elements beyond half an ulp is recorded as ``beyond_half_ulp`` (prefixed for the
gradients). Every tensor of a call is tried in a layout of its own (``layout_cases``), and short,
tiny and constant rows expose each term: weight, bias, eps and the variance's 1 / n.
"""

import inspect
import math
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from kernels.layernorm import (
    CPU_BACKWARD_PROGRAMS,
    LOOPED_BLOCK,
    MAX_FUSED_COLS,
    backward_slots,
    layernorm,
    layernorm_backward,
    layernorm_forward,
    layernorm_reference,
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
EPS = 1e-5

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
# (F.layer_norm with autograd, which also accumulates in fp32 and rounds once). Two effects
# separate the kernel from torch when both are correct: fp32 sums taken in a different order
# (a few fp32 ulps, invisible next to a bf16/fp16 rounding), and, on CPU, the Triton
# interpreter truncating fp32 -> bf16 where torch rounds to nearest, which alone doubles the
# largest rounding error (1 ulp against 0.5). K = 3 covers that doubling with room for the
# sample-to-sample spread of torch's own maximum, yet a wrong term in dx (a missing mean, a
# dropped eps, a mis-scaled rstd) is off by far more than 3x. Over seeds 2-7 of every case in
# this file on CPU, the largest share of the bound (floor included) any check used was
# 51 %; on a GPU, which rounds to nearest as torch does, the truncation's doubling is gone.
# Torch can also be exact by luck (one element, a gradient whose terms cancel), so the bound
# has a floor: what any correct implementation that computes in fp32 and rounds once may be
# off by. That is one ulp of the output dtype at the largest reference value (the rounding; a
# truncation on CPU), plus FP32_ULPS fp32 roundings of the largest term that cancels inside
# the result. The terms are the formula evaluated on absolute values, x - mean counted as
# |x| + |mean| (the usual forward error bound, Higham, "Accuracy and Stability of Numerical
# Algorithms", ch. 3): on the offset inputs they are 1e3 times the result.
K = 3.0
FP32_ULPS = 4.0


def _fp32_depth(rows: int, cols: int) -> int:
    """fp32 roundings an fp16/bf16 output may carry before its one store, in ulps of its terms.

    A row's sums are lane-wise partial sums (one term per streamed block) reduced by a tree:
    ``cols / LOOPED_BLOCK + log2(cols)`` roundings deep, for the mean and again for the
    variance. rsqrt, the products and (for dx) the two means of the backward add a few more,
    each approximate on a GPU; dweight and dbias add one per row.
    """
    return 16 + 2 * (math.ceil(math.log2(cols + 1)) + cols // LOOPED_BLOCK) + rows


InputMaker = Callable[[tuple[int, int], torch.dtype, torch.Generator], torch.Tensor]


def _large(shape: tuple[int, int], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    # Squared deviations near 1e8 overflow fp16 (max 65504) unless summed in fp32. fp16 itself
    # holds 1e4 only up to ~6 sigma, so it gets 1e3; fp32 and bf16 share fp32's range.
    scale = 1e3 if dtype == torch.float16 else 1e4
    return (torch.randn(shape, generator=gen) * scale).to(dtype)


def _offset(shape: tuple[int, int], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    # A mean far larger than the spread: E[x**2] - E[x]**2 cancels ~6 of fp32's 7 digits here,
    # so only a variance taken from centered values survives. bf16 gets 1e2, where its ulp
    # (0.5) still resolves a unit spread; at 1e3 most of its rows would be constant.
    offset = 1e2 if dtype == torch.bfloat16 else 1e3
    return (torch.randn(shape, generator=gen) + offset).to(dtype)


def _constant(shape: tuple[int, int], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    # Even rows hold one value repeated (variance 0: only eps keeps rstd finite, and
    # x - mean must come out exactly 0); the values are exact in every dtype and their sums
    # are exact in fp32. Odd rows are ordinary.
    x = torch.randn(shape, generator=gen)
    values = torch.tensor([0.5, -3.0, 100.25, 7.0, -0.125])
    even = torch.arange(0, shape[0], 2)
    x[even] = values[even % len(values), None]
    return x.to(dtype)


def _tiny(shape: tuple[int, int], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    # A variance near 1e-6, under EPS: the result depends on eps being added.
    return (torch.randn(shape, generator=gen) * 1e-3).to(dtype)


DISTRIBUTIONS: dict[str, InputMaker] = {
    "randn": randn,
    "large": _large,
    "offset": _offset,
    "constant": _constant,
    "tiny": _tiny,
}
# The fp32 error of y on these inputs is set by rounding the mean at the magnitude of x (1e3
# times the spread), not by the output dtype, so no fixed per-dtype bound fits: the forward
# too is held to K times torch's same-dtype error, with the same kind of floor.
ILL_CONDITIONED = {"offset"}


def _make_inputs(
    shape: tuple[int, int], dtype: torch.dtype, dist: str, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x, weight, bias, grad_out)``; all but ``x`` standard normal, signs included."""
    gen = torch.Generator().manual_seed(seed)
    x = DISTRIBUTIONS[dist](shape, dtype, gen)
    weight = torch.randn(shape[1], generator=gen).to(dtype)
    bias = torch.randn(shape[1], generator=gen).to(dtype)
    grad_out = torch.randn(shape, generator=gen).to(dtype)
    return x.to(DEVICE), weight.to(DEVICE), bias.to(DEVICE), grad_out.to(DEVICE)


def _terms(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, grad_out: torch.Tensor
) -> dict[str, torch.Tensor]:
    """The fp64 formulas for y and the gradients evaluated on absolute values."""
    mean = x.mean(dim=-1, keepdim=True)
    rstd = torch.rsqrt((x - mean).pow(2).mean(dim=-1, keepdim=True) + EPS)
    abs_xhat, abs_wg = (x.abs() + mean.abs()) * rstd, (weight * grad_out).abs()
    return {
        "y": abs_xhat * weight.abs() + bias.abs(),
        "dx": rstd * (
            abs_wg + abs_wg.mean(dim=-1, keepdim=True)
            + abs_xhat * (abs_wg * abs_xhat).mean(dim=-1, keepdim=True)
        ),
        "dw": (grad_out.abs() * abs_xhat).sum(dim=0),
        "db": grad_out.abs().sum(dim=0),
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
    bias: torch.Tensor,
    grad_out: torch.Tensor,
    record_property: Callable[[str, object], None],
    ill_conditioned: bool = False,
    out: torch.Tensor | None = None,
    dx: torch.Tensor | None = None,
) -> None:
    """Run forward and backward into NaN-poisoned outputs and check both against fp64."""
    out = torch.full_like(x, float("nan")) if out is None else out
    dx = torch.full_like(x, float("nan")) if dx is None else dx
    inputs = {"x": x, "weight": weight, "bias": bias, "grad_out": grad_out}
    inputs_before = {name: t.clone() for name, t in inputs.items()}

    y, mean, rstd = layernorm_forward(x, weight, bias, EPS, out=out)
    dx_result, dweight, dbias = layernorm_backward(grad_out, x, weight, mean, rstd, dx=dx)

    assert y.data_ptr() == out.data_ptr(), "layernorm must write into the out= tensor"
    assert dx_result.data_ptr() == dx.data_ptr(), "layernorm_backward must write into the dx= tensor"
    for name, before in inputs_before.items():
        assert torch.equal(inputs[name], before), f"layernorm modified its input {name}"

    x64, w64, b64 = (t.to(torch.float64).requires_grad_() for t in (x, weight, bias))
    g64 = grad_out.to(torch.float64)
    expected = layernorm_reference(x64, w64, b64, EPS)
    expected.backward(g64)

    x_torch, w_torch, b_torch = (t.clone().requires_grad_() for t in (x, weight, bias))
    y_torch = F.layer_norm(x_torch, x.shape[-1:], w_torch, b_torch, EPS)
    y_torch.backward(grad_out)

    terms = _terms(x64.detach(), w64.detach(), b64.detach(), g64)

    if ill_conditioned:
        errors = _within_torch("y", out, y_torch.detach(), expected.detach(), terms["y"])
    else:
        errors = assert_close(out, expected.detach(), tolerance_for(x.dtype))
    record_errors(record_property, errors)
    for name, ours, theirs, want in (
        ("dx", dx, x_torch.grad, x64.grad),
        ("dw", dweight, w_torch.grad, w64.grad),
        ("db", dbias, b_torch.grad, b64.grad),
    ):
        grad_errors = _within_torch(name, ours, theirs, want, terms[name])
        record_errors(record_property, grad_errors, prefix=f"{name}_")

    if x.dtype != torch.float32:
        # y and dx are stored by the kernels; dweight's and dbias's fp32 partials are summed and
        # rounded by torch on the host, which always rounds to nearest.
        depth = _fp32_depth(x.numel() // max(x.shape[-1], 1), x.shape[-1])
        record_rounding(record_property, assert_correctly_rounded(out, expected.detach(), terms=terms["y"],
                                                                  fp32_ulps=depth))
        for name, ours, want, rounding in (
            ("dx", dx, x64.grad, None), ("dw", dweight, w64.grad, "nearest"), ("db", dbias, b64.grad, "nearest"),
        ):
            try:
                stats = assert_correctly_rounded(ours, want, terms=terms[name], fp32_ulps=depth, rounding=rounding)
            except AssertionError as exc:
                raise AssertionError(f"{name}: {exc}") from None
            record_rounding(record_property, stats, prefix=f"{name}_")


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("dist", list(DISTRIBUTIONS))
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_layernorm(
    shape: tuple[int, int],
    dtype: torch.dtype,
    dist: str,
    seed: int,
    record_property: Callable[[str, object], None],
) -> None:
    _check(*_make_inputs(shape, dtype, dist, seed), record_property, dist in ILL_CONDITIONED)


@pytest.mark.parametrize("dist", list(DISTRIBUTIONS))
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
def test_layernorm_long_row(
    dtype: torch.dtype, dist: str, record_property: Callable[[str, object], None]
) -> None:
    _check(*_make_inputs(LONG_SHAPE, dtype, dist, 0), record_property, dist in ILL_CONDITIONED)


@pytest.mark.parametrize("cols", [1000, LONG_SHAPE[1]])
def test_layernorm_strided_rows_stay_in_bounds(
    cols: int, record_property: Callable[[str, object], None]
) -> None:
    # Views into wider buffers: row strides differ from the row length, and the poisoned
    # columns around the out and dx views must still be NaN afterwards, so no lane reads or
    # writes past its row; weight and bias are strided views too. Every backward program gets several rows, so dweight is
    # accumulated across rows inside a program, in registers and, for long rows, in memory.
    rows = ROWS_SHARING_A_PROGRAM
    gen = torch.Generator().manual_seed(0)
    x = torch.randn((rows, cols + 9), generator=gen).to(DEVICE)[:, 4 : 4 + cols]
    grad_out = torch.randn((rows, cols + 5), generator=gen).to(DEVICE)[:, 1 : 1 + cols]
    weight = torch.randn(2 * cols, generator=gen).to(DEVICE)[::2]
    bias = torch.randn(2 * cols, generator=gen).to(DEVICE)[1::2]
    out_buffer = torch.full((rows, cols + 9), float("nan"), device=DEVICE)
    dx_buffer = torch.full((rows, cols + 9), float("nan"), device=DEVICE)

    _check(
        x, weight, bias, grad_out, record_property,
        out=out_buffer[:, 4 : 4 + cols], dx=dx_buffer[:, 4 : 4 + cols],
    )

    for buffer in (out_buffer, dx_buffer):
        assert buffer[:, :4].isnan().all() and buffer[:, 4 + cols :].isnan().all()


# Layouts as a test dimension (roofwatch.layouts): each tensor of the forward and backward in a
# layout of its own, so a kernel addressing one with another's row stride fails. Inputs take any
# layout (a non-unit column stride is copied first, weight and bias always are); out and dx
# need unit-stride rows, and other layouts are refused. One fused and one streamed row length,
# with enough rows that every backward program reads several.
LAYOUTS = {
    "x": ["contiguous", "padded", "transposed", "strided"],
    "weight": ["contiguous", "padded", "strided"],
    "bias": ["contiguous", "padded", "strided"],
    "grad_out": ["contiguous", "padded", "transposed", "strided"],
    "out": ["contiguous", "padded"],
    "dx": ["contiguous", "padded"],
}
REFUSED = {(name, layout): f"{name} must be contiguous along its last dimension"
           for name in ("out", "dx") for layout in ("transposed", "strided")}


@pytest.mark.parametrize("cols", [300, LONG_SHAPE[1]])
@pytest.mark.parametrize("case", layout_cases(LAYOUTS), ids=str)
def test_layernorm_layouts(case: LayoutCase, cols: int, record_property: Callable[[str, object], None]) -> None:
    rows = ROWS_SHARING_A_PROGRAM if cols <= MAX_FUSED_COLS else 3
    values = dict(zip(("x", "weight", "bias", "grad_out"), _make_inputs((rows, cols), torch.float16, "randn", 0)))
    placed = {name: case.input(name, value) for name, value in values.items()}
    placed |= {name: case.output(name, values["x"]) for name in ("out", "dx")}

    _check(*(placed[name].tensor for name in values), record_property,
           out=placed["out"].tensor, dx=placed["dx"].tensor)

    for name, tensor in placed.items():
        tensor.assert_outside_intact(name)


@pytest.mark.parametrize(("tensor", "layout"), list(REFUSED), ids=str)
def test_layernorm_refuses_layouts_it_cannot_write(tensor: str, layout: str) -> None:
    x, weight, bias, grad_out = _make_inputs((3, 40), torch.float32, "randn", 0)
    bad = place(torch.full_like(x, float("nan")), layout)
    with pytest.raises(ValueError, match=REFUSED[tensor, layout]):
        if tensor == "out":
            layernorm_forward(x, weight, bias, EPS, out=bad.tensor)
        else:
            _, mean, rstd = layernorm_forward(x, weight, bias, EPS)
            layernorm_backward(grad_out, x, weight, mean, rstd, dx=bad.tensor)
    bad.assert_outside_intact(tensor)


# Sizes that expose every term (roofwatch.exposure): what a kernel with one term wrong would
# compute, each exposed by a case whose inputs make that term matter in every dtype. Long
# rows hide a variance over n - 1 (torch.var's default: a 1e-3 change at n = 1000, under the
# fp16 bound); rows whose variance is far above eps hide eps.
def _variant(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float, *, n_offset: int = 0,
             eps_outside: bool = False, bias_inside: bool = False) -> torch.Tensor:
    x64, w64, b64 = x.double(), weight.double(), bias.double()
    centered = x64 - x64.mean(dim=-1, keepdim=True)
    variance = centered.pow(2).sum(dim=-1, keepdim=True) / (x.shape[-1] + n_offset)
    scale = 1 / (variance.sqrt() + eps) if eps_outside else torch.rsqrt(variance + eps)
    return (centered * scale + b64) * w64 if bias_inside else centered * scale * w64 + b64


ALTERNATIVES: dict[str, tuple[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]]] = {
    # name: (the parameter whose term it gets wrong, what it computes)
    "variance over n - 1": ("x", lambda x, w, b: _variant(x, w, b, EPS, n_offset=-1)),
    "variance over n + 1 (a padding lane counted)": ("x", lambda x, w, b: _variant(x, w, b, EPS, n_offset=1)),
    "weight ignored": ("weight", lambda x, w, b: _variant(x, torch.ones_like(w), b, EPS)),
    "bias ignored": ("bias", lambda x, w, b: _variant(x, w, torch.zeros_like(b), EPS)),
    "bias added before the weight": ("bias", lambda x, w, b: _variant(x, w, b, EPS, bias_inside=True)),
    "eps dropped": ("eps", lambda x, w, b: _variant(x, w, b, 0.0)),
    "eps outside the root": ("eps", lambda x, w, b: _variant(x, w, b, EPS, eps_outside=True)),
}

EXPOSING_CASES: dict[str, tuple[tuple[int, int], InputMaker, list[str]]] = {
    "short-rows": ((5, 7), randn, ["variance over n - 1", "variance over n + 1 (a padding lane counted)",
                                   "weight ignored", "bias ignored", "bias added before the weight"]),
    # A variance near 1e-6, under eps (1e-5).
    "tiny-rows": ((5, 7), _tiny, ["eps outside the root", "bias ignored"]),
    # The norm of a constant row is exactly the bias; without eps it is 0 / 0.
    "constant-rows": ((6, 7), _constant, ["eps dropped", "bias ignored"]),
}


def test_every_parameter_has_a_term_exposed() -> None:
    parameters = set(inspect.signature(layernorm_forward).parameters) - {"out"}
    exposed = {ALTERNATIVES[name][0] for _, _, names in EXPOSING_CASES.values() for name in names}
    assert exposed == parameters


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("case", list(EXPOSING_CASES))
def test_layernorm_exposes_every_term(case: str, dtype: torch.dtype, record_property: Callable[[str, object], None]
                                      ) -> None:
    shape, make, names = EXPOSING_CASES[case]
    gen = torch.Generator().manual_seed(0)
    x = make(shape, dtype, gen).to(DEVICE)
    weight, bias = (torch.randn(shape[1], generator=gen).to(dtype=dtype, device=DEVICE) for _ in range(2))

    y, _, _ = layernorm_forward(x, weight, bias, EPS)

    expected = _variant(x, weight, bias, EPS)
    assert_exposes(expected, {name: ALTERNATIVES[name][1](x, weight, bias) for name in names}, tolerance_for(dtype))
    record_errors(record_property, assert_close(y, expected, tolerance_for(dtype)))
    if case == "constant-rows":
        constant = torch.arange(shape[0], device=DEVICE) % 2 == 0
        assert torch.equal(y[constant], bias.expand_as(y)[constant]), "a constant row must normalize to the bias"


@pytest.mark.parametrize("shape", [(2, 3, 100), (3, LONG_SHAPE[1])], ids=lambda s: "x".join(map(str, s)))
def test_layernorm_autograd_matches_the_kernels(shape: tuple[int, ...]) -> None:
    # layernorm(x, w, b).backward(g) runs the same kernels as the explicit calls, on any
    # leading dimensions; sum().backward() hands the backward a stride-0 (expanded) grad_out.
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=gen).to(DEVICE)
    weight = torch.randn(shape[-1], generator=gen).to(DEVICE)
    bias = torch.randn(shape[-1], generator=gen).to(DEVICE)
    y, mean, rstd = layernorm_forward(x, weight, bias, EPS)
    dx, dweight, dbias = layernorm_backward(torch.ones_like(x), x, weight, mean, rstd)

    x_leaf, w_leaf, b_leaf = (t.clone().requires_grad_() for t in (x, weight, bias))
    y_auto = layernorm(x_leaf, w_leaf, b_leaf, EPS)
    y_auto.sum().backward()

    assert y_auto.shape == x.shape and torch.equal(y_auto.detach(), y)
    assert torch.equal(x_leaf.grad, dx) and torch.equal(w_leaf.grad, dweight) and torch.equal(b_leaf.grad, dbias)


@pytest.mark.parametrize(
    "shape", [(ROWS_SHARING_A_PROGRAM, 300), (3, LONG_SHAPE[1])], ids=lambda s: f"{s[0]}x{s[1]}"
)
def test_layernorm_is_deterministic(shape: tuple[int, int]) -> None:
    # The forward reduces each row inside one program, and the backward's dweight and dbias
    # partials are written without atomics and summed by torch in a fixed order: for one
    # device and shape, every output is bit-for-bit the same from call to call.
    x, weight, bias, grad_out = _make_inputs(shape, torch.bfloat16, "randn", 0)
    first = layernorm_forward(x, weight, bias, EPS)
    first_grads = layernorm_backward(grad_out, x, weight, first[1], first[2])
    second = layernorm_forward(x, weight, bias, EPS)
    second_grads = layernorm_backward(grad_out, x, weight, second[1], second[2])

    assert all(torch.equal(a, b) for a, b in zip(first, second))
    assert all(torch.equal(a, b) for a, b in zip(first_grads, second_grads))


@pytest.mark.parametrize("shape", [(0, 5), (4, 0)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_layernorm_empty(shape: tuple[int, int]) -> None:
    x = torch.empty(shape, device=DEVICE)
    weight, bias = torch.ones(shape[1], device=DEVICE), torch.zeros(shape[1], device=DEVICE)
    y, mean, rstd = layernorm_forward(x, weight, bias)
    dx, dweight, dbias = layernorm_backward(torch.empty_like(x), x, weight, mean, rstd)
    assert y.shape == dx.shape == shape and dweight.shape == dbias.shape == (shape[1],)
    assert not dweight.any() and not dbias.any()


def test_layernorm_rejects_bad_arguments() -> None:
    x = torch.randn((2, 3), device=DEVICE)
    weight, bias = torch.ones(3, device=DEVICE), torch.zeros(3, device=DEVICE)
    with pytest.raises(TypeError):
        layernorm(x.double(), weight.double(), bias.double())
    with pytest.raises(ValueError, match="weight must be"):
        layernorm(x, torch.ones(4, device=DEVICE), bias)
    with pytest.raises(ValueError, match="bias must be"):
        layernorm(x, weight, bias.half())
    with pytest.raises(ValueError, match="out must match"):
        layernorm(x, weight, bias, out=torch.empty((3, 2), device=DEVICE))
    with pytest.raises(ValueError, match="mean must be"):
        layernorm_backward(x, x, weight, torch.zeros(3, device=DEVICE), torch.ones(2, device=DEVICE))
    with pytest.raises(ValueError, match="does not support autograd"):
        layernorm(x, weight, bias.requires_grad_(), out=torch.empty_like(x))
