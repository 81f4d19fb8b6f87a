"""Triton flash-attention forward against an fp64 reference, judged by torch's same-dtype error.

Each case may be at most ``K_TORCH`` times as far from ``softmax(Q Kᵀ·scale + mask) V`` in
fp64 as ``F.scaled_dot_product_attention`` in the same dtype (``assert_within_torch_error``).
Outputs are poisoned with NaN before the call, inputs must come back unchanged, and the
measured error is recorded as junit properties ``max_abs_err`` / ``max_rel_err``.

q, k, v and the output are tried in layouts of their own (``layout_cases``): a KV cache is
laid out unlike q, so a kernel addressing K with Q's batch or head stride must fail. The output
is not held to correct rounding: P is rounded to the input dtype before the PV product by
design (as in FlashAttention, for the tensor cores' full rate), so the result is not the exact
one rounded once; it stays within ``K_TORCH`` times torch's error instead. A short causal case
exposes every parameter's term (the scale, the mask, each operand).
"""

import inspect
import math
import os
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from kernels.attention import attention, attention_reference
from roofwatch.checks import IGNORE_RECORD_PROPERTY_WARNING, record_errors, shape_id
from roofwatch.exposure import assert_exposes
from roofwatch.layouts import LAYOUTS as ALL_LAYOUTS
from roofwatch.layouts import LayoutCase, layout_cases, place
from roofwatch.tolerances import ErrorStats, Tolerance, assert_close, assert_within_torch_error, dtype_name

# pytest's default junit family (xunit2) warns on record_property yet still writes the
# properties, which roofwatch reads; the warning says nothing useful on every case.
pytestmark = IGNORE_RECORD_PROPERTY_WARNING

ON_GPU = torch.cuda.is_available()
DEVICE = "cuda" if ON_GPU else "cpu"
INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"

# k = 2: the kernel, like the kernels torch's SDPA dispatches to for fp16/bf16 (FlashAttention-2
# on a GPU, a flash-style kernel on CPU), accumulates in fp32 and feeds the PV product with P in
# the input dtype. Torch's CPU SDPA does not upcast to fp32 and round once: its error measured
# up to 1.7x that of the fp32 result rounded to bf16 (seq 1000), close to a P-rounded-to-dtype
# emulation. Against it the kernel's fp16 error measured 0.87-1.18x over 60 CPU cases;
# bf16 under the interpreter also needs the floor below.
K_TORCH = 2.0

# (batch, heads, seq, head_dim). The interpreter's tiles are 32 query rows by 16 keys: seq 1 is
# a lone partial block, 17 one full key block plus a masked tail, 64 whole blocks only, and
# 100 several query blocks, six unmasked key blocks and a 4-key tail; causal runs cross the
# two-block diagonal at every query block.
SHAPES: list[tuple[int, int, int, int]] = [
    (1, 1, 1, 64),
    (2, 1, 17, 128),
    (1, 2, 64, 64),
    (1, 1, 100, 128),
    (1, 2, 100, 64),
]
if ON_GPU and not INTERPRETED:
    # Past every autotuned tile, with sequence lengths that end mid-block.
    SHAPES += [(2, 3, 257, 64), (1, 4, 1024, 128), (2, 2, 2049, 128), (1, 8, 4096, 64)]

DTYPES = [torch.float16, torch.bfloat16]
SEEDS = [0, 1]


def _torch_floor(expected: torch.Tensor, dtype: torch.dtype) -> float:
    """The ``atol`` floor of ``assert_within_torch_error`` for an output of ``dtype``.

    The interpreter casts fp32 -> bf16 by truncation (P before the PV product, and the output)
    where torch and the GPU round to nearest: one bf16 ulp at the output's largest magnitude
    covers it. Measured on the CPU cases: the kernel's error exceeded 2 x torch's by at most
    0.47 of that.
    """
    if INTERPRETED and dtype == torch.bfloat16:
        return torch.finfo(dtype).eps * float(expected.abs().max())
    return 1e-5


Triple = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def _randn(shape: tuple[int, int, int, int], gen: torch.Generator) -> Triple:
    q, k, v = (torch.randn(shape, generator=gen) for _ in range(3))
    return q, k, v


def _large_logits(shape: tuple[int, int, int, int], gen: torch.Generator) -> Triple:
    # q and k scaled by 10 give scaled scores with a standard deviation of 100 (q·k sums
    # head_dim terms of variance 10^4, divided by sqrt(head_dim)): row maxima of several
    # hundred, where exp() overflows fp32 (past 88) unless the running max is subtracted.
    q, k, v = _randn(shape, gen)
    return q * 10, k * 10, v


DISTRIBUTIONS: dict[str, Callable[[tuple[int, int, int, int], torch.Generator], Triple]] = {
    "randn": _randn,
    "large_logits": _large_logits,
}


def _make_inputs(shape: tuple[int, int, int, int], dtype: torch.dtype, dist: str, seed: int) -> Triple:
    gen = torch.Generator().manual_seed(seed)
    q, k, v = DISTRIBUTIONS[dist](shape, gen)
    return q.to(dtype).to(DEVICE), k.to(dtype).to(DEVICE), v.to(dtype).to(DEVICE)


def _check(out: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
           sm_scale: float | None = None) -> ErrorStats:
    expected, _ = attention_reference(q, k, v, causal, sm_scale, out_dtype=torch.float64)
    baseline = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sm_scale)
    return assert_within_torch_error(out, baseline, expected, k=K_TORCH, atol=_torch_floor(expected, out.dtype))


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("dist", list(DISTRIBUTIONS))
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_attention(
    shape: tuple[int, int, int, int],
    causal: bool,
    dtype: torch.dtype,
    dist: str,
    seed: int,
    record_property: Callable[[str, object], None],
) -> None:
    q, k, v = _make_inputs(shape, dtype, dist, seed)
    before = [x.clone() for x in (q, k, v)]
    out = torch.full(shape, float("nan"), dtype=dtype, device=DEVICE)

    result = attention(q, k, v, causal, out=out)

    assert result.data_ptr() == out.data_ptr(), "attention must write into the out= tensor"
    assert all(torch.equal(x, x0) for x, x0 in zip((q, k, v), before)), "attention modified its inputs"
    errors = _check(out, q, k, v, causal)
    record_errors(record_property, errors)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dist", list(DISTRIBUTIONS))
def test_attention_log_sum_exp(causal: bool, dist: str, record_property: Callable[[str, object], None]) -> None:
    # The LSE is fp32 from fp32 scores: relative error near fp32's, across magnitudes up to
    # several hundred in the large-logit case.
    q, k, v = _make_inputs((1, 2, 100, 64), torch.float16, dist, 0)
    _, lse = attention(q, k, v, causal, return_lse=True)
    _, expected = attention_reference(q, k, v, causal)
    errors = assert_close(lse, expected, Tolerance(atol=1e-5, rtol=1e-5))
    record_errors(record_property, errors)


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_is_deterministic(causal: bool, dtype: torch.dtype) -> None:
    # Bit-identical outputs for identical inputs: roofwatch tracks errors across commits, and
    # a kernel whose reduction order varied between runs would drift by itself.
    q, k, v = _make_inputs((1, 2, 100, 64), dtype, "randn", 0)
    assert torch.equal(attention(q, k, v, causal), attention(q, k, v, causal))


def test_attention_strided_inputs_and_scale(record_property: Callable[[str, object], None]) -> None:
    # (batch, seq, heads, head_dim) activations viewed as (batch, heads, seq, head_dim), as
    # models hand them over: strides differ from a contiguous tensor's in every dimension but
    # the last. A non-default sm_scale is passed through.
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn((2, 33, 2, 64), generator=gen).to(torch.float16).to(DEVICE).transpose(1, 2)
               for _ in range(3))
    out = attention(q, k, v, True, sm_scale=0.3)
    errors = _check(out, q, k, v, True, sm_scale=0.3)
    record_errors(record_property, errors)


# Layouts as a test dimension (roofwatch.layouts): q, k, v and out each in a layout of its own
# (in every case the three inputs differ), so a kernel addressing K or V with Q's batch, head
# or row strides fails. "permuted" stores (batch, heads, seq, dim) as (seq, heads, batch, dim),
# unlike q's batch and head strides, as a KV cache is. Inputs take any layout (a strided
# head_dim is copied first); out needs a unit-stride head_dim, and other layouts are refused.
LAYOUTS = {"q": list(ALL_LAYOUTS), "k": list(ALL_LAYOUTS), "v": list(ALL_LAYOUTS),
           "out": ["contiguous", "padded", "permuted"]}
REFUSED = {("out", layout): "out must be contiguous along its last dimension" for layout in ("transposed", "strided")}


@pytest.mark.parametrize("case", layout_cases(LAYOUTS), ids=str)
def test_attention_layouts(case: LayoutCase, record_property: Callable[[str, object], None]) -> None:
    q, k, v = _make_inputs((2, 2, 33, 64), torch.float16, "randn", 0)
    placed = {"q": case.input("q", q), "k": case.input("k", k), "v": case.input("v", v), "out": case.output("out", q)}

    attention(placed["q"].tensor, placed["k"].tensor, placed["v"].tensor, True, out=placed["out"].tensor)

    for name, tensor in placed.items():
        tensor.assert_outside_intact(name)
    record_errors(record_property, _check(placed["out"].tensor, q, k, v, True))


@pytest.mark.parametrize(("tensor", "layout"), list(REFUSED), ids=str)
def test_attention_refuses_layouts_it_cannot_write(tensor: str, layout: str) -> None:
    q = torch.randn((1, 2, 4, 64), device=DEVICE).to(torch.float16)
    bad = place(torch.full_like(q, float("nan")), layout)
    with pytest.raises(ValueError, match=REFUSED[tensor, layout]):
        attention(q, q, q, False, out=bad.tensor)
    bad.assert_outside_intact(tensor)


# Sizes that expose every term (roofwatch.exposure): what a kernel with one parameter's term
# wrong would compute, on a short causal case with two heads, each told apart by the bound the
# suite holds it to (K_TORCH times torch's error, with its floor).
def _variant(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, diagonal: int | None = 0
             ) -> torch.Tensor:
    scores = (q.double() @ k.double().transpose(-2, -1)) * scale
    if diagonal is not None:
        seq = q.shape[-2]
        hidden = torch.ones((seq, seq), dtype=torch.bool, device=q.device).triu(1 + diagonal)
        scores = scores.masked_fill(hidden, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v.double()


def _first_head(x: torch.Tensor) -> torch.Tensor:
    return x[:, :1].expand_as(x)


AttentionVariant = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float], torch.Tensor]
ALTERNATIVES: dict[str, tuple[str, AttentionVariant]] = {
    # name: (the parameter whose term it gets wrong, what it computes given the right scale)
    "queries of the first head for every head": ("q", lambda q, k, v, s: _variant(_first_head(q), k, v, s)),
    "keys of the first head for every head": ("k", lambda q, k, v, s: _variant(q, _first_head(k), v, s)),
    "values of the first head for every head": ("v", lambda q, k, v, s: _variant(q, k, _first_head(v), s)),
    "causal mask ignored": ("causal", lambda q, k, v, s: _variant(q, k, v, s, diagonal=None)),
    "one key past the diagonal visible": ("causal", lambda q, k, v, s: _variant(q, k, v, s, diagonal=1)),
    "scale ignored": ("sm_scale", lambda q, k, v, s: _variant(q, k, v, 1.0)),
    "1 / head_dim for the scale": ("sm_scale", lambda q, k, v, s: _variant(q, k, v, s * s)),
}


def test_every_parameter_has_a_term_exposed() -> None:
    parameters = set(inspect.signature(attention).parameters) - {"out", "return_lse"}
    assert {param for param, _ in ALTERNATIVES.values()} == parameters


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
def test_attention_exposes_every_term(dtype: torch.dtype, record_property: Callable[[str, object], None]) -> None:
    q, k, v = _make_inputs((1, 2, 17, 64), dtype, "randn", 0)
    scale = 1 / math.sqrt(q.shape[-1])

    out = attention(q, k, v, True)

    expected = _variant(q, k, v, scale)
    baseline = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    bound = Tolerance(atol=K_TORCH * float((baseline.double() - expected).abs().max()) + _torch_floor(expected, dtype),
                      rtol=0.0)
    assert_exposes(expected, {name: compute(q, k, v, scale) for name, (_, compute) in ALTERNATIVES.items()}, bound)
    record_errors(record_property, _check(out, q, k, v, True))


def test_attention_rejects_bad_arguments() -> None:
    q = torch.randn((1, 1, 4, 64), device=DEVICE).to(torch.float16)
    with pytest.raises(ValueError, match="batch, heads, seq, head_dim"):
        attention(q[0], q[0], q[0], False)
    with pytest.raises(ValueError, match="one shape"):
        attention(q, q[:, :, :2], q, False)
    with pytest.raises(TypeError):
        attention(q.float(), q.float(), q.float(), False)
    with pytest.raises(ValueError, match="head_dim"):
        attention(q[..., :32], q[..., :32], q[..., :32], False)
    with pytest.raises(ValueError, match="sm_scale"):
        attention(q, q, q, False, sm_scale=-1.0)
    with pytest.raises(ValueError, match="out must match"):
        attention(q, q, q, False, out=torch.empty((1, 1, 4, 64), device=DEVICE))
