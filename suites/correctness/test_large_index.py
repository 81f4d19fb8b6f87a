"""Offsets past 2**31 elements: one case per kernel family, on a GPU only.

Every other case of this suite uses tensors far smaller than 2**31 elements, so a kernel whose
offsets fell back to 32-bit arithmetic (``row * stride`` in int32, wrapping past 2**31) would
pass all of them. Here each kernel family gets an input whose rows (elements, tokens, batches)
lie beyond element 2**31 of some tensor, runs once, and the part of the output at and past the
boundary is compared with the same kernel's output on a copy of those rows small enough that
every offset fits in 32 bits. Each row is computed by the same code in both runs, so they must
agree bit for bit; a wrapped offset reads or writes the wrong rows, or faults.
``tests/harness/test_planted_bugs_large_index.py`` plants a 32-bit offset in each family and
sees its case fail.

The matmul is the exception: its autotuned tiles depend on M, so its rows past the boundary are
held to an fp32 torch product instead (an addressing error is off by the whole value, not by
a rounding). The norms' ``dweight`` sums over every row in an order that depends on how many
rows there are; it is not compared here (``test_rmsnorm.py`` and ``test_layernorm.py`` do).

Each case takes ``boundary``, the element count to pass, so its logic can be run on a CPU at a
small one (``tests/harness/test_large_index_cases.py``); here it is 2**31. Memory: 8–18 GiB per
case; a case skips where the device has less free.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

from kernels.attention import attention
from kernels.copy import add, copy
from kernels.cross_entropy import cross_entropy_loss_and_grad
from kernels.layernorm import layernorm_backward, layernorm_forward
from kernels.matmul import matmul
from kernels.quant import quantize_int8_rowwise
from kernels.rmsnorm import rmsnorm_backward, rmsnorm_forward
from kernels.rotary import rotary
from kernels.softmax import softmax
from kernels.swiglu import swiglu

BOUNDARY = 2**31
GIB = 1 << 30
# Rows (tokens, batches) past the boundary; a few, so the small copy costs nothing.
TAIL = 4
DTYPE = torch.bfloat16
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _randn(*shape: int, seed: int) -> torch.Tensor:
    # Drawn on the device: 2**31 normals take seconds on a host.
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    return torch.randn(shape, generator=generator, device=DEVICE, dtype=DTYPE)


def _rows_past(boundary: int, cols: int) -> tuple[int, int]:
    """``(rows, first)``: a row count whose last ``TAIL`` rows start at or past element
    ``boundary`` of a ``(rows, cols)`` tensor, and the first row compared (one before the
    row that crosses the boundary)."""
    crossing = boundary // cols
    return crossing + TAIL, max(crossing - 1, 0)


# Same-size integer views: elements compared as bit patterns.
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _same(name: str, got: torch.Tensor, expected: torch.Tensor) -> None:
    """Bit-for-bit equality, with where the first difference is."""
    assert got.shape == expected.shape, f"{name}: shape {tuple(got.shape)} != {tuple(expected.shape)}"
    differs = got.view(_BITS[got.element_size()]) != expected.view(_BITS[expected.element_size()])
    if bool(differs.any()):
        first = torch.nonzero(differs)[0].tolist()
        raise AssertionError(f"{name}: {int(differs.sum())} of {differs.numel()} elements differ from the small "
                             f"copy's, first at index {first} of the compared rows")


def check_copy(boundary: int) -> None:
    n = boundary + TAIL * 1024 + 3  # an odd tail: the last block is masked
    x, y = _randn(n, seed=0), _randn(n, seed=1)
    first = max(boundary - 4096, 0)
    out = copy(x)
    _same("copy", out[first:], x[first:])
    del out
    total = add(x, y)
    _same("add", total[first:], add(x[first:].clone(), y[first:].clone()))


def check_softmax(boundary: int) -> None:
    cols = 4096
    rows, first = _rows_past(boundary, cols)
    x = _randn(rows, cols, seed=0)
    _same("softmax", softmax(x)[first:], softmax(x[first:].clone()))


def check_cross_entropy(boundary: int) -> None:
    vocab = 32768
    tokens, first = _rows_past(boundary, vocab)
    logits = _randn(tokens, vocab, seed=0)
    target = torch.randint(0, vocab, (tokens,), generator=torch.Generator(device=DEVICE).manual_seed(1),
                           device=DEVICE)
    # "sum": each row's gradient does not depend on how many rows there are.
    grad = torch.empty_like(logits)
    loss, _ = cross_entropy_loss_and_grad(logits, target, reduction="sum", grad=grad)
    small_grad = torch.empty_like(logits[first:])
    small_loss, _ = cross_entropy_loss_and_grad(logits[first:].clone(), target[first:].clone(), reduction="sum",
                                                grad=small_grad)
    _same("loss", loss[first:], small_loss)
    _same("grad", grad[first:], small_grad)


def check_rmsnorm(boundary: int) -> None:
    cols = 8192
    rows, first = _rows_past(boundary, cols)
    x, weight = _randn(rows, cols, seed=0), _randn(cols, seed=1)
    y, rstd = rmsnorm_forward(x, weight)
    small_x = x[first:].clone()
    small_y, small_rstd = rmsnorm_forward(small_x, weight)
    _same("y", y[first:], small_y)
    _same("rstd", rstd[first:], small_rstd)
    del y
    grad_out = _randn(rows, cols, seed=2)
    dx, _ = rmsnorm_backward(grad_out, x, weight, rstd)
    small_dx, _ = rmsnorm_backward(grad_out[first:].clone(), small_x, weight, small_rstd)
    _same("dx", dx[first:], small_dx)


def check_layernorm(boundary: int) -> None:
    cols = 8192
    rows, first = _rows_past(boundary, cols)
    x, weight, bias = _randn(rows, cols, seed=0), _randn(cols, seed=1), _randn(cols, seed=2)
    y, mean, rstd = layernorm_forward(x, weight, bias)
    small_x = x[first:].clone()
    small_y, small_mean, small_rstd = layernorm_forward(small_x, weight, bias)
    _same("y", y[first:], small_y)
    _same("mean", mean[first:], small_mean)
    _same("rstd", rstd[first:], small_rstd)
    del y
    grad_out = _randn(rows, cols, seed=3)
    dx, _, _ = layernorm_backward(grad_out, x, weight, mean, rstd)
    small_dx, _, _ = layernorm_backward(grad_out[first:].clone(), small_x, weight, small_mean, small_rstd)
    _same("dx", dx[first:], small_dx)


def check_rotary(boundary: int) -> None:
    q_heads, k_heads, head_dim = 32, 8, 128
    seq, first = _rows_past(boundary, q_heads * head_dim)
    q, k = _randn(1, seq, q_heads, head_dim, seed=0), _randn(1, seq, k_heads, head_dim, seed=1)
    angles = torch.arange(seq, device=DEVICE, dtype=torch.float32)[:, None] * torch.rand(
        head_dim // 2, device=DEVICE, generator=torch.Generator(device=DEVICE).manual_seed(2))
    cos, sin = angles.cos(), angles.sin()
    q_out, k_out = rotary(q, k, cos, sin)
    # The small copy is a sequence of its own: its positions index the tail of the tables.
    small_q, small_k = rotary(q[:, first:].clone(), k[:, first:].clone(), cos[first:].clone(), sin[first:].clone())
    _same("q", q_out[:, first:], small_q)
    _same("k", k_out[:, first:], small_k)


def check_swiglu(boundary: int) -> None:
    cols = 14336
    rows, first = _rows_past(boundary, cols)
    gate, up = _randn(rows, cols, seed=0), _randn(rows, cols, seed=1)
    _same("out", swiglu(gate, up)[first:], swiglu(gate[first:].clone(), up[first:].clone()))


def check_quant(boundary: int) -> None:
    cols = 4096
    rows, first = _rows_past(boundary, cols)
    x = _randn(rows, cols, seed=0)
    q, scale = quantize_int8_rowwise(x)
    small_q, small_scale = quantize_int8_rowwise(x[first:].clone())
    _same("q", q[first:], small_q)
    _same("scale", scale[first:], small_scale)


def check_matmul(boundary: int) -> None:
    k, n = 4096, 256
    m, first = _rows_past(boundary, k)
    m += 256 - TAIL  # a whole row tile past the boundary, as well as the one across it
    a, b = _randn(m, k, seed=0), _randn(k, n, seed=1)
    c = matmul(a, b)[first:].float()
    expected = a[first:].float() @ b.float()
    # Two bf16 roundings of a value of ~sqrt(k): the product's and the reference's cast.
    error = (c - expected).abs().max().item()
    bound = 2 * 2**-8 * expected.abs().max().item()
    assert error <= bound, f"matmul rows past the boundary: max abs err {error:.3g} > {bound:.3g}"


def check_attention(boundary: int) -> None:
    heads, seq, head_dim = 32, 128, 128
    batch, first = _rows_past(boundary, heads * seq * head_dim)
    q, k, v = (_randn(batch, heads, seq, head_dim, seed=s) for s in range(3))
    out = attention(q, k, v, causal=False)
    small = attention(q[first:].clone(), k[first:].clone(), v[first:].clone(), causal=False)
    assert isinstance(out, torch.Tensor) and isinstance(small, torch.Tensor)
    _same("out", out[first:], small)


@dataclass(frozen=True)
class LargeCase:
    """One kernel family's case: ``check(boundary)``, needing about ``gib`` GiB at 2**31."""

    family: str
    check: Callable[[int], None]
    gib: float


CASES = [
    LargeCase("copy", check_copy, 12.1),
    LargeCase("softmax", check_softmax, 8.1),
    LargeCase("cross_entropy", check_cross_entropy, 8.1),
    LargeCase("rmsnorm", check_rmsnorm, 16.2),
    LargeCase("layernorm", check_layernorm, 16.2),
    LargeCase("rotary", check_rotary, 10.6),
    LargeCase("swiglu", check_swiglu, 12.1),
    LargeCase("quant", check_quant, 6.1),
    LargeCase("matmul", check_matmul, 4.4),
    LargeCase("attention", check_attention, 16.2),
]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="2**31 elements need a GPU (the interpreter would take hours)")
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.family)
def test_offsets_past_2_31(case: LargeCase) -> None:
    free, _ = torch.cuda.mem_get_info()
    if free < case.gib * GIB * 1.1:
        pytest.skip(f"{case.family} needs about {case.gib:.0f} GiB of device memory, {free / GIB:.0f} GiB free")
    try:
        case.check(BOUNDARY)
    finally:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
