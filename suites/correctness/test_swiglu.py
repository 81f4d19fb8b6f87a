"""Fused SwiGLU (forward and backward) against fp64 torch.

Each case poisons the outputs with NaN before the call, places a canary after every tensor
that must survive it, checks the inputs are untouched and records ``max_abs_err`` / ``max_rel_err`` as junit properties. The distributions aim at
silu's edges: large positive gates (silu saturates to the gate), large negative gates (silu
underflows to -0.0, where a sigmoid written as ``exp(g) / (1 + exp(g))`` gives inf / inf).

fp16 and bf16 outputs, forward and backward, are also held to correct rounding
(``assert_correctly_rounded``): silu and the product are computed in fp32 and rounded once, so
a kernel that rounds silu(gate) to the storage dtype before multiplying by up (as the unfused
``F.silu(gate) * up`` does) fails; the share of elements beyond half an ulp is recorded as
``beyond_half_ulp``. Every tensor is tried in a layout of its own (``layout_cases``): gate and
up come from different projections in a model.
"""

import inspect
from collections.abc import Callable

import pytest
import torch

from kernels.swiglu import (
    BLOCK,
    SwiGLUFunction,
    swiglu,
    swiglu_backward,
    swiglu_backward_reference,
    swiglu_reference,
)
from roofwatch.checks import (
    IGNORE_RECORD_PROPERTY_WARNING,
    INPUT_CANARY,
    assert_guard_intact,
    guarded,
    poisoned_output,
    record_errors,
    shape_id,
)
from roofwatch.exposure import assert_exposes
from roofwatch.layouts import LayoutCase, layout_cases, place
from roofwatch.rounding import assert_correctly_rounded, record_rounding
from roofwatch.tolerances import assert_close, dtype_name, tolerance_for

pytestmark = [
    IGNORE_RECORD_PROPERTY_WARNING,
    # The interpreter evaluates sigmoid with numpy, whose exp warns when exp(-gate) overflows
    # to inf for a large negative gate; inf is the intended value there (sigmoid -> 0).
    pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning"),
]

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SEEDS = [0, 1]

# The fp32 error allowed before the fp16/bf16 store, in fp32 ulps of the terms: exp(-gate)
# loses about |gate| ulps to the rounding of its argument (on a GPU, gate * log2(e)), up to
# ~90 before sigmoid underflows; the add, divide and products a few more. Below gate = -88,
# exp(-gate) overflows and sigmoid is 0 where it is under fp32's smallest normal; bf16 still
# holds silu(gate) * up there (2e-35 at gate -91, up -1400), so the output may lose fp32's
# smallest normal times what multiplies sigmoid: |gate * up| (underflow_scale).
FP32_ULPS = 128

# A single element, a row shorter than a block, a 3-D activation whose 3000 elements end
# mid-block, and exactly one block plus one element.
SHAPES: list[tuple[int, ...]] = [(1, 1), (1, 7), (2, 3, 500), (1, BLOCK + 1)]
assert any(torch.Size(s).numel() > BLOCK and torch.Size(s).numel() % BLOCK for s in SHAPES)

Pair = tuple[torch.Tensor, torch.Tensor]
InputMaker = Callable[[tuple[int, ...], torch.dtype, torch.Generator], Pair]


def _randn(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> Pair:
    gate, up = torch.randn((2, *shape), generator=gen)
    return gate.to(dtype), up.to(dtype)


def _large(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> Pair:
    # |gate| and |up| up to half the square root of the dtype's max, so their product is
    # finite in fp16 too (gates to +-128 there, up to ~1e4 elsewhere, where sigmoid is
    # exactly 0 or 1 in fp32).
    limit = torch.finfo(dtype).max ** 0.5 / 2
    gate, up = (torch.randn((2, *shape), generator=gen) * 3000).clamp(-limit, limit)
    return gate.to(dtype), up.to(dtype)


def _negative_gate(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> Pair:
    # Gates from -20 down to -2e4: silu(g) = g * sigmoid(g) falls below the smallest fp16
    # and then fp32 value and underflows; the output must be a (signed) zero, never NaN.
    gate = -(20 + torch.rand(shape, generator=gen) * 2e4)
    up = torch.randn(shape, generator=gen)
    return gate.to(dtype), up.to(dtype)


def _special(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> Pair:
    tiny = torch.finfo(dtype).tiny
    values = torch.tensor([0.0, -0.0, tiny, -tiny, 1.0, -1.0], dtype=dtype)
    gate, up = values[torch.randint(len(values), (2, *shape), generator=gen)]
    return gate, up


DISTRIBUTIONS: dict[str, InputMaker] = {
    "randn": _randn,
    "large": _large,
    "negative_gate": _negative_gate,
    "special": _special,
}


# Elements of canary (roofwatch.checks.guarded) placed after each tensor: a lane that runs past the end reads the
# inputs' finite canary and overwrites the output's NaN one, which each case then checks.
def _make_inputs(shape: tuple[int, ...], dtype: torch.dtype, dist: str, seed: int) -> Pair:
    gate, up = DISTRIBUTIONS[dist](shape, dtype, torch.Generator().manual_seed(seed))
    return guarded(gate.to(DEVICE), INPUT_CANARY)[0], guarded(up.to(DEVICE), INPUT_CANARY)[0]


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("dist", list(DISTRIBUTIONS))
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_swiglu(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    dist: str,
    seed: int,
    record_property: Callable[[str, object], None],
) -> None:
    gate, up = _make_inputs(shape, dtype, dist, seed)
    gate_before, up_before = gate.clone(), up.clone()
    out, guard = poisoned_output(gate)

    result = swiglu(gate, up, out=out)

    assert result.data_ptr() == out.data_ptr(), "swiglu must write into the out= tensor"
    assert_guard_intact(guard, "out")
    assert torch.equal(gate, gate_before) and torch.equal(up, up_before), "swiglu modified an input"
    expected = swiglu_reference(gate, up, torch.float64)
    errors = assert_close(out, expected, tolerance_for(dtype))
    record_errors(record_property, errors)
    if dtype != torch.float32:
        stats = assert_correctly_rounded(out, expected, fp32_ulps=FP32_ULPS, underflow_scale=_sigmoid_factor(gate, up))
        record_rounding(record_property, stats)


def _sigmoid_factor(gate: torch.Tensor, up: torch.Tensor, grad_out: torch.Tensor | None = None) -> torch.Tensor:
    """What multiplies sigmoid(gate) in the output: |gate * up| (forward), |g * up * (1 + |gate|)|."""
    factor = (gate.double() * up.double()).abs()
    if grad_out is not None:
        factor = (grad_out.double() * up.double()).abs() * (1 + gate.double().abs())
    return factor


def _grad_gate_terms(gate: torch.Tensor, up: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
    """grad_gate = g * up * sig * (1 + gate * (1 - sig)) on absolute values: where it cancels."""
    gate64 = gate.double()
    sig = torch.sigmoid(gate64)
    return (grad_out.double() * up.double()).abs() * sig * (1 + gate64.abs() * (1 - sig))


@pytest.mark.parametrize("dist", ["randn", "large", "negative_gate"])
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
def test_swiglu_backward(dtype: torch.dtype, dist: str, record_property: Callable[[str, object], None]) -> None:
    shape = (3, 700)
    gate, up = _make_inputs(shape, dtype, dist, seed=0)
    grad_out = torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(dtype=dtype, device=DEVICE)
    inputs_before = [t.clone() for t in (gate, up, grad_out)]
    grad_gate, gate_guard = poisoned_output(gate)
    grad_up, up_guard = poisoned_output(up)

    swiglu_backward(gate, up, grad_out, grad_gate=grad_gate, grad_up=grad_up)

    assert_guard_intact(gate_guard, "grad_gate")
    assert_guard_intact(up_guard, "grad_up")
    assert all(torch.equal(t, before) for t, before in zip((gate, up, grad_out), inputs_before))
    want_gate, want_up = swiglu_backward_reference(gate, up, grad_out)
    tolerance = tolerance_for(dtype)
    gate_errors = assert_close(grad_gate, want_gate, tolerance)
    up_errors = assert_close(grad_up, want_up, tolerance)
    record_property("max_abs_err", max(gate_errors.max_abs, up_errors.max_abs))
    record_property("max_rel_err", max(gate_errors.max_rel, up_errors.max_rel))
    if dtype != torch.float32:
        terms = _grad_gate_terms(gate, up, grad_out)
        for name, ours, want, magnitude, underflow in (
            ("grad_gate", grad_gate, want_gate, terms, _sigmoid_factor(gate, up, grad_out)),
            ("grad_up", grad_up, want_up, None, _sigmoid_factor(gate, grad_out)),
        ):
            try:
                stats = assert_correctly_rounded(ours, want, terms=magnitude, fp32_ulps=FP32_ULPS,
                                                 underflow_scale=underflow)
            except AssertionError as exc:
                raise AssertionError(f"{name}: {exc}") from None
            record_rounding(record_property, stats, prefix=f"{name}_")


def test_swiglu_autograd_runs_the_fused_kernels() -> None:
    gen = torch.Generator().manual_seed(0)
    gate, up, grad_out = torch.randn((3, 2, 300), generator=gen).to(DEVICE)
    gate_leaf, up_leaf = gate.clone().requires_grad_(), up.clone().requires_grad_()

    out = SwiGLUFunction.apply(gate_leaf, up_leaf)
    out.backward(grad_out)

    assert torch.equal(out.detach(), swiglu(gate, up))
    want_gate, want_up = swiglu_backward(gate, up, grad_out)
    assert torch.equal(gate_leaf.grad, want_gate) and torch.equal(up_leaf.grad, want_up)


def test_swiglu_reads_halves_of_a_fused_projection_in_place(record_property: Callable[[str, object], None]) -> None:
    # gate and up as the two halves of one (tokens, 2 * intermediate) projection, and the
    # output a view into a wider buffer: row strides differ from the row length everywhere,
    # and the poisoned columns around the output view must stay NaN.
    gen = torch.Generator().manual_seed(0)
    tokens, inter = 3, 1030
    gate_up = torch.randn((tokens, 2 * inter), generator=gen).to(DEVICE)
    gate, up = gate_up.chunk(2, dim=-1)
    out_buffer = torch.full((tokens, inter + 9), float("nan"), device=DEVICE)
    out = out_buffer[:, 4 : 4 + inter]

    swiglu(gate, up, out=out)

    errors = assert_close(out, swiglu_reference(gate, up, torch.float64), tolerance_for(gate.dtype))
    assert out_buffer[:, :4].isnan().all() and out_buffer[:, 4 + inter :].isnan().all()
    record_errors(record_property, errors)


def test_swiglu_copies_layouts_without_a_row_stride(record_property: Callable[[str, object], None]) -> None:
    # A transposed input has no (rows, cols) view with unit column stride; it is copied
    # to contiguous rather than misread.
    gen = torch.Generator().manual_seed(0)
    gate = torch.randn((40, 3), generator=gen).to(DEVICE).t()
    up = torch.randn((3, 40), generator=gen).to(DEVICE)
    errors = assert_close(swiglu(gate, up), swiglu_reference(gate, up, torch.float64), tolerance_for(gate.dtype))
    record_errors(record_property, errors)


# Layouts as a test dimension (roofwatch.layouts): gate and up from different projections,
# outputs written into views, each tensor of forward and backward in a layout of its own, so a
# kernel reading up with gate's row stride (or writing out with an input's) fails. Inputs take
# any layout (one without a row stride is copied first); outputs need unit-stride rows, and
# other layouts are refused. 1030 columns cross a block boundary in every row.
LAYOUTS = {
    "gate": ["contiguous", "padded", "transposed", "strided"],
    "up": ["contiguous", "padded", "transposed", "strided"],
    "out": ["contiguous", "padded"],
    "grad_out": ["contiguous", "padded", "transposed", "strided"],
    "grad_gate": ["contiguous", "padded"],
    "grad_up": ["contiguous", "padded"],
}
REFUSED = {(name, layout): f"{name} must be contiguous along its last dimension"
           for name in ("out", "grad_gate", "grad_up") for layout in ("transposed", "strided")}


@pytest.mark.parametrize("case", layout_cases(LAYOUTS), ids=str)
def test_swiglu_layouts(case: LayoutCase, record_property: Callable[[str, object], None]) -> None:
    gen = torch.Generator().manual_seed(0)
    values = {name: torch.randn((3, 1030), generator=gen).to(dtype=torch.float16, device=DEVICE)
              for name in ("gate", "up", "grad_out")}
    placed = {name: case.input(name, value) for name, value in values.items()}
    placed |= {name: case.output(name, values["gate"]) for name in ("out", "grad_gate", "grad_up")}
    gate, up, grad_out = (placed[name].tensor for name in values)

    swiglu(gate, up, out=placed["out"].tensor)
    swiglu_backward(gate, up, grad_out, grad_gate=placed["grad_gate"].tensor, grad_up=placed["grad_up"].tensor)

    for name, tensor in placed.items():
        tensor.assert_outside_intact(name)
    want_gate, want_up = swiglu_backward_reference(values["gate"], values["up"], values["grad_out"])
    for name, want in (("out", swiglu_reference(values["gate"], values["up"], torch.float64)),
                       ("grad_gate", want_gate), ("grad_up", want_up)):
        try:
            errors = assert_close(placed[name].tensor, want, tolerance_for(torch.float16))
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None
        record_errors(record_property, errors, prefix="" if name == "out" else f"{name}_")


@pytest.mark.parametrize(("tensor", "layout"), list(REFUSED), ids=str)
def test_swiglu_refuses_layouts_it_cannot_write(tensor: str, layout: str) -> None:
    gate, up = torch.randn((2, 4, 40), device=DEVICE)
    bad = place(torch.full_like(gate, float("nan")), layout)
    with pytest.raises(ValueError, match=REFUSED[tensor, layout]):
        if tensor == "out":
            swiglu(gate, up, out=bad.tensor)
        else:
            swiglu_backward(gate, up, up, **{tensor: bad.tensor})
    bad.assert_outside_intact(tensor)


# Sizes that expose every term (roofwatch.exposure): what a kernel with one input's term wrong
# would compute, each told apart from silu(gate) * up in every dtype.
ALTERNATIVES: dict[str, tuple[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]] = {
    "sigmoid(gate) * up (silu without its gate factor)":
        ("gate", lambda gate, up: torch.sigmoid(gate.double()) * up.double()),
    "gate and up swapped": ("up", lambda gate, up: swiglu_reference(up, gate, torch.float64)),
    "silu(gate) alone": ("up", lambda gate, up: torch.nn.functional.silu(gate.double())),
}


def test_every_parameter_has_a_term_exposed() -> None:
    parameters = set(inspect.signature(swiglu).parameters) - {"out"}
    assert {param for param, _ in ALTERNATIVES.values()} == parameters


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
def test_swiglu_exposes_every_term(dtype: torch.dtype, record_property: Callable[[str, object], None]) -> None:
    gate, up = _make_inputs((4, 37), dtype, "randn", 0)
    out = swiglu(gate, up)
    expected = swiglu_reference(gate, up, torch.float64)
    assert_exposes(expected, {name: compute(gate, up) for name, (_, compute) in ALTERNATIVES.items()},
                   tolerance_for(dtype))
    record_errors(record_property, assert_close(out, expected, tolerance_for(dtype)))


def test_swiglu_is_deterministic() -> None:
    gen = torch.Generator().manual_seed(0)
    gate, up = (torch.randn((4, 1500), generator=gen).to(DEVICE) for _ in range(2))
    first, second = swiglu(gate, up), swiglu(gate, up)
    assert torch.equal(first.view(torch.int32), second.view(torch.int32))


def test_swiglu_rejects_bad_arguments() -> None:
    gate = torch.randn((4, 6), device=DEVICE)
    with pytest.raises(TypeError):
        swiglu(gate.double(), gate.double())
    with pytest.raises(ValueError, match="up must match gate"):
        swiglu(gate, gate[:, :5])
    with pytest.raises(ValueError, match="up must match gate"):
        swiglu(gate, gate.half())
    with pytest.raises(ValueError, match="out must be contiguous along its last dimension"):
        swiglu(gate, gate, out=torch.empty((6, 4), device=DEVICE).t())
    with pytest.raises(ValueError, match="at least one dimension"):
        swiglu(gate[0, 0], gate[0, 0])


@pytest.mark.parametrize("shape", [(0,), (0, 5), (4, 0)], ids=shape_id)
def test_swiglu_empty(shape: tuple[int, ...]) -> None:
    empty = torch.empty(shape, device=DEVICE)
    assert swiglu(empty, empty).shape == shape
