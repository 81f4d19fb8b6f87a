"""Rotary position embedding (forward, non-interleaved) against an fp64 reference.

Each case poisons both outputs with NaN before the call, places a canary after q, k and the
outputs that must survive it, checks q, k and the tables are left untouched, and records
``max_abs_err`` / ``max_rel_err`` as junit properties. The tables come from positions far
into a long context, so every angle's sign and quadrant occurs.

fp16 and bf16 outputs are also held to correct rounding (``assert_correctly_rounded``): each
rotated value is computed in fp32 and rounded once; the share of elements beyond half an ulp
is recorded as ``beyond_half_ulp``. Every tensor is tried in a layout of its own
(``layout_cases``): a KV cache laid out unlike q, cos and sin sliced out of wider caches with
row strides of their own, outputs written into views.
"""

import inspect
from collections.abc import Callable
from typing import NamedTuple

import pytest
import torch

from kernels.rotary import rotary, rotary_reference
from roofwatch.checks import (
    IGNORE_RECORD_PROPERTY_WARNING,
    INPUT_CANARY,
    assert_guard_intact,
    guarded,
    large,
    poisoned_output,
    randn,
    record_errors,
)
from roofwatch.exposure import assert_exposes
from roofwatch.layouts import LayoutCase, layout_cases, place
from roofwatch.rounding import RoundingStats, assert_correctly_rounded, record_rounding
from roofwatch.tolerances import ErrorStats, Tolerance, assert_close, dtype_name, tolerance_for

pytestmark = IGNORE_RECORD_PROPERTY_WARNING

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SEEDS = [0, 1]
ROPE_THETA = 10_000.0


class Shape(NamedTuple):
    batch: int
    seq: int
    q_heads: int
    k_heads: int
    head_dim: int


# One token and one head; Llama's head_dim 128 with grouped-query attention (32 q heads over
# 8 kv heads, two head blocks for q); an odd head count with a single kv head; head_dim 64;
# and head_dim 80, whose 40-wide halves end mid-block.
SHAPES: list[Shape] = [
    Shape(1, 1, 1, 1, 128),
    Shape(1, 2, 32, 8, 128),
    Shape(2, 3, 5, 1, 128),
    Shape(2, 3, 4, 4, 64),
    Shape(1, 3, 3, 2, 80),
]

InputMaker = Callable[[tuple[int, ...], torch.dtype, torch.Generator], torch.Tensor]


def _special(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    tiny = torch.finfo(dtype).tiny
    values = torch.tensor([0.0, -0.0, tiny, -tiny, 1.0, -1.0], dtype=dtype)
    return values[torch.randint(len(values), shape, generator=gen)]


# large: a rotated pair's norm is preserved, but one output can reach
# sqrt(2) * max(|x1|, |x2|); half the dtype's max keeps it finite.
DISTRIBUTIONS: dict[str, InputMaker] = {"randn": randn, "large": large, "special": _special}


# Elements of canary (roofwatch.checks.guarded) placed after q, k and their outputs: a lane that runs past the end reads
# the inputs' finite canary and overwrites the outputs' NaN one, which each case checks.
def _tables(seq: int, head_dim: int, start: int, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin, ``(seq, head_dim / 2)``, for positions ``start .. start + seq - 1``."""
    inv_freq = ROPE_THETA ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.arange(start, start + seq, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return angles.cos().to(dtype=dtype, device=DEVICE), angles.sin().to(dtype=dtype, device=DEVICE)


def _tolerance(dtype: torch.dtype, x: torch.Tensor) -> Tolerance:
    # The fp32 math errs by a few ulps of the operands, not of the result: where x1 * cos and
    # x2 * sin nearly cancel, the result is small and a bound relative to it says nothing.
    # Hence an absolute term of 4 fp32 ulps of the largest input.
    base = tolerance_for(dtype)
    scale = float(x.abs().max()) if x.numel() else 0.0
    return Tolerance(atol=base.atol + 4 * torch.finfo(torch.float32).eps * scale, rtol=base.rtol)


def _check(
    actual: torch.Tensor, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> ErrorStats:
    return assert_close(actual, rotary_reference(x, cos, sin, torch.float64), _tolerance(x.dtype, x))


def _worst(*errors: ErrorStats) -> ErrorStats:
    return ErrorStats(max(e.max_abs for e in errors), max(e.max_rel for e in errors))


def _rotation_terms(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Both products of each rotated value on absolute values: what the fp32 sum cancels."""
    half = x.shape[-1] // 2
    x64 = x.double().abs()
    c, s = cos.double().abs()[None, :, None, :], sin.double().abs()[None, :, None, :]
    x1, x2 = x64[..., :half], x64[..., half:]
    return torch.cat((x1 * c + x2 * s, x2 * c + x1 * s), dim=-1)


def _check_rounding(actual: torch.Tensor, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> RoundingStats:
    # Two products and a sum in fp32 (one fused multiply-add on a GPU): a few ulps of the
    # products. Each product of a tiny input may underflow: two smallest normals at most.
    expected = rotary_reference(x, cos, sin, torch.float64)
    return assert_correctly_rounded(actual, expected, terms=_rotation_terms(x, cos, sin), fp32_ulps=4,
                                    underflow_scale=2.0)


def _shape_id(shape: Shape) -> str:
    return f"b{shape.batch}s{shape.seq}q{shape.q_heads}k{shape.k_heads}d{shape.head_dim}"


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("dist", list(DISTRIBUTIONS))
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("shape", SHAPES, ids=_shape_id)
def test_rotary(
    shape: Shape,
    dtype: torch.dtype,
    dist: str,
    seed: int,
    record_property: Callable[[str, object], None],
) -> None:
    gen = torch.Generator().manual_seed(seed)
    make = DISTRIBUTIONS[dist]
    q = make((shape.batch, shape.seq, shape.q_heads, shape.head_dim), dtype, gen).to(DEVICE)
    k = make((shape.batch, shape.seq, shape.k_heads, shape.head_dim), dtype, gen).to(DEVICE)
    q, k = guarded(q, INPUT_CANARY)[0], guarded(k, INPUT_CANARY)[0]
    cos, sin = _tables(shape.seq, shape.head_dim, start=4000 * seed + 17)
    before = [t.clone() for t in (q, k, cos, sin)]
    q_out, q_guard = poisoned_output(q)
    k_out, k_guard = poisoned_output(k)

    result = rotary(q, k, cos, sin, q_out=q_out, k_out=k_out)

    assert result[0].data_ptr() == q_out.data_ptr() and result[1].data_ptr() == k_out.data_ptr()
    assert_guard_intact(q_guard, "q_out")
    assert_guard_intact(k_guard, "k_out")
    assert all(torch.equal(t, b) for t, b in zip((q, k, cos, sin), before)), "rotary modified an input"
    errors = _worst(_check(q_out, q, cos, sin), _check(k_out, k, cos, sin))
    record_errors(record_property, errors)
    if dtype != torch.float32:
        q_stats, k_stats = _check_rounding(q_out, q, cos, sin), _check_rounding(k_out, k, cos, sin)
        record_rounding(record_property, RoundingStats(max(q_stats.max_ulps, k_stats.max_ulps),
                                                       (q_stats.beyond_half_ulp + k_stats.beyond_half_ulp) / 2))


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
def test_rotary_matches_the_rotate_half_formula(
    dtype: torch.dtype, record_property: Callable[[str, object], None]
) -> None:
    # The convention, stated independently of rotary_reference: transformers' Llama
    # x * cos + rotate_half(x) * sin, with its duplicated (seq, head_dim) tables, here in the
    # activation dtype as transformers passes them.
    gen = torch.Generator().manual_seed(0)
    q = torch.randn((2, 3, 4, 64), generator=gen).to(dtype=dtype, device=DEVICE)
    k = torch.randn((2, 3, 2, 64), generator=gen).to(dtype=dtype, device=DEVICE)
    cos, sin = _tables(3, 64, start=100, dtype=dtype)

    q_out, k_out = rotary(q, k, cos, sin)

    cos_full = torch.cat((cos, cos), dim=-1).double()[None, :, None, :]
    sin_full = torch.cat((sin, sin), dim=-1).double()[None, :, None, :]

    def rotate_half(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    errors = []
    for actual, x in ((q_out, q), (k_out, k)):
        x64 = x.double()
        errors.append(assert_close(actual, x64 * cos_full + rotate_half(x64) * sin_full, _tolerance(dtype, x)))
    worst = _worst(*errors)
    record_errors(record_property, worst)


def test_rotary_reads_views_of_a_fused_qkv_projection(record_property: Callable[[str, object], None]) -> None:
    # q and k as head slices of one (batch, seq, q + 2 * kv heads, head_dim) projection, and
    # the outputs views into wider poisoned buffers (extra heads on each side): every stride
    # but head_dim's differs from a contiguous tensor's, and nothing outside the views may be
    # written.
    gen = torch.Generator().manual_seed(0)
    batch, seq, hq, hk, d = 2, 3, 4, 2, 64
    qkv = torch.randn((batch, seq, hq + 2 * hk, d), generator=gen).to(DEVICE)
    q, k = qkv[:, :, :hq], qkv[:, :, hq : hq + hk]
    q_buffer = torch.full((batch, seq, hq + 2, d), float("nan"), device=DEVICE)
    k_buffer = torch.full((batch, seq, hk + 2, d), float("nan"), device=DEVICE)
    q_out, k_out = q_buffer[:, :, 1 : 1 + hq], k_buffer[:, :, 1 : 1 + hk]
    cos, sin = _tables(seq, d, start=7)

    rotary(q, k, cos, sin, q_out=q_out, k_out=k_out)

    errors = _worst(_check(q_out, q, cos, sin), _check(k_out, k, cos, sin))
    for buffer in (q_buffer, k_buffer):
        assert buffer[:, :, 0].isnan().all() and buffer[:, :, -1].isnan().all(), "wrote outside the output view"
    record_errors(record_property, errors)


def test_rotary_reads_a_heads_major_layout(record_property: Callable[[str, object], None]) -> None:
    # (batch, heads, seq, head_dim) storage seen as (batch, seq, heads, head_dim), as after a
    # transpose; and a q whose head_dim is strided, which is copied first.
    gen = torch.Generator().manual_seed(0)
    q = torch.randn((2, 3, 5, 64), generator=gen).to(DEVICE).transpose(1, 2)
    k = torch.randn((2, 5, 3, 128), generator=gen).to(DEVICE)[..., ::2]
    cos, sin = _tables(5, 64, start=3)

    q_out, k_out = rotary(q, k, cos, sin)

    errors = _worst(_check(q_out, q, cos, sin), _check(k_out, k, cos, sin))
    record_errors(record_property, errors)


# Layouts as a test dimension (roofwatch.layouts): each of q, k, cos, sin and the outputs in a
# layout of its own, so a kernel addressing k with q's strides, or sin with cos's row stride,
# fails. q and k take any layout (a strided head_dim is copied first), the tables any (sliced
# out of wider caches when padded); outputs need a unit-stride head_dim, and other layouts are
# refused. Two batches and three positions, so batch and sequence strides both matter.
LAYOUTS = {
    "q": ["contiguous", "padded", "permuted", "transposed", "strided"],
    "k": ["contiguous", "padded", "permuted", "transposed", "strided"],
    "cos": ["contiguous", "padded", "strided"],
    "sin": ["contiguous", "padded", "strided"],
    "q_out": ["contiguous", "padded", "permuted"],
    "k_out": ["contiguous", "padded", "permuted"],
}
REFUSED = {(name, layout): f"{name} must be contiguous along head_dim"
           for name in ("q_out", "k_out") for layout in ("transposed", "strided")}
LAYOUT_SHAPE = Shape(2, 3, 4, 2, 64)


@pytest.mark.parametrize("case", layout_cases(LAYOUTS), ids=str)
def test_rotary_layouts(case: LayoutCase, record_property: Callable[[str, object], None]) -> None:
    b, s, hq, hk, d = LAYOUT_SHAPE
    gen = torch.Generator().manual_seed(0)
    q = torch.randn((b, s, hq, d), generator=gen).to(dtype=torch.float16, device=DEVICE)
    k = torch.randn((b, s, hk, d), generator=gen).to(dtype=torch.float16, device=DEVICE)
    cos, sin = _tables(s, d, start=1000)
    placed = {"q": case.input("q", q), "k": case.input("k", k), "cos": case.input("cos", cos),
              "sin": case.input("sin", sin), "q_out": case.output("q_out", q), "k_out": case.output("k_out", k)}

    rotary(*(placed[name].tensor for name in ("q", "k", "cos", "sin")),
           q_out=placed["q_out"].tensor, k_out=placed["k_out"].tensor)

    for name, tensor in placed.items():
        tensor.assert_outside_intact(name)
    errors = _worst(_check(placed["q_out"].tensor, q, cos, sin), _check(placed["k_out"].tensor, k, cos, sin))
    record_errors(record_property, errors)


@pytest.mark.parametrize(("tensor", "layout"), list(REFUSED), ids=str)
def test_rotary_refuses_layouts_it_cannot_write(tensor: str, layout: str) -> None:
    q = torch.randn((1, 3, 2, 64), device=DEVICE)
    cos, sin = _tables(3, 64, start=0)
    bad = place(torch.full_like(q, float("nan")), layout)
    with pytest.raises(ValueError, match=REFUSED[tensor, layout]):
        rotary(q, q, cos, sin, **{tensor: bad.tensor})
    bad.assert_outside_intact(tensor)


# Sizes that expose every term (roofwatch.exposure): what a kernel with one input's term wrong
# would compute on q and k together, each told apart from the right rotation in every dtype.
def _rotate_both(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return torch.cat([rotary_reference(x, cos, sin, torch.float64).flatten() for x in (q, k)])


ALTERNATIVES: dict[str, tuple[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]]] = {
    "q left unrotated": ("q", lambda q, k, c, s: torch.cat([q.double().flatten(),
                                                             rotary_reference(k, c, s, torch.float64).flatten()])),
    "k rotated with q's first head": ("k", lambda q, k, c, s: _rotate_both(q, q[:, :, :1].expand_as(k), c, s)),
    "cos and sin swapped": ("cos", lambda q, k, c, s: _rotate_both(q, k, s, c)),
    "rotated the other way (sin negated)": ("sin", lambda q, k, c, s: _rotate_both(q, k, c, -s)),
}


def test_every_parameter_has_a_term_exposed() -> None:
    parameters = set(inspect.signature(rotary).parameters) - {"q_out", "k_out"}
    assert {param for param, _ in ALTERNATIVES.values()} == parameters


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
def test_rotary_exposes_every_term(dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(0)
    q = torch.randn((1, 3, 2, 8), generator=gen).to(dtype=dtype, device=DEVICE)
    k = torch.randn((1, 3, 1, 8), generator=gen).to(dtype=dtype, device=DEVICE)
    cos, sin = _tables(3, 8, start=5)

    q_out, k_out = rotary(q, k, cos, sin)

    expected = _rotate_both(q, k, cos, sin)
    tolerance = _tolerance(dtype, torch.cat([q.flatten(), k.flatten()]))
    assert_exposes(expected, {name: compute(q, k, cos, sin) for name, (_, compute) in ALTERNATIVES.items()},
                   tolerance)
    assert_close(torch.cat([q_out.flatten(), k_out.flatten()]), expected, tolerance)


def test_rotary_is_deterministic() -> None:
    gen = torch.Generator().manual_seed(0)
    q = torch.randn((2, 3, 8, 128), generator=gen).to(DEVICE)
    k = torch.randn((2, 3, 2, 128), generator=gen).to(DEVICE)
    cos, sin = _tables(3, 128, start=0)
    first, second = rotary(q, k, cos, sin), rotary(q, k, cos, sin)
    for a, b in zip(first, second):
        assert torch.equal(a.view(torch.int32), b.view(torch.int32))


def test_rotary_rejects_bad_arguments() -> None:
    q = torch.randn((1, 3, 2, 64), device=DEVICE)
    cos, sin = _tables(3, 64, start=0)
    with pytest.raises(ValueError, match="head_dim must be even"):
        rotary(q[..., :63], q[..., :63], cos[:, :31], sin[:, :31])
    with pytest.raises(ValueError, match=r"cos must be \(seq, head_dim / 2\)"):
        rotary(q, q, cos[:2], sin)
    with pytest.raises(ValueError, match="k must match q"):
        rotary(q, q.half(), cos, sin)
    with pytest.raises(ValueError, match="batch, seq, heads, head_dim"):
        rotary(q[0], q[0], cos, sin)
    with pytest.raises(TypeError):
        rotary(q.double(), q.double(), cos, sin)
    with pytest.raises(ValueError, match="q_out must be contiguous along head_dim"):
        rotary(q, q, cos, sin, q_out=torch.empty((1, 3, 2, 128), device=DEVICE)[..., ::2])


def test_rotary_empty() -> None:
    q = torch.empty((0, 3, 2, 64), device=DEVICE)
    cos, sin = _tables(3, 64, start=0)
    q_out, k_out = rotary(q, q, cos, sin)
    assert q_out.shape == k_out.shape == q.shape
