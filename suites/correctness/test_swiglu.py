"""Fused SwiGLU (forward and backward) against fp64 torch.

Each case poisons the outputs with NaN before the call, places a canary after every tensor
that must survive it, checks the inputs are untouched and records ``max_abs_err`` / ``max_rel_err`` as junit properties. The distributions aim at
silu's edges: large positive gates (silu saturates to the gate), large negative gates (silu
underflows to -0.0, where a sigmoid written as ``exp(g) / (1 + exp(g))`` gives inf / inf).
"""

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
    errors = assert_close(out, swiglu_reference(gate, up, torch.float64), tolerance_for(dtype))
    record_errors(record_property, errors)


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
