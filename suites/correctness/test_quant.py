"""Triton int8 quantization and the W8A16 matmul against torch references.

Quantization is integer-valued, so it is checked for exact equality with the same arithmetic
in torch, and against the bound ``|q * scale - x| <= scale / 2`` in fp64. The matmul's error
grows with K, so it may be at most ``k`` times torch's own same-dtype error. Outputs are
poisoned first (NaN, or -128 for int8, a value the symmetric grid never produces) and inputs
checked untouched; the measured errors are recorded as junit properties.

fp16/bf16 outputs of the dequantization and the matmul are also held to correct rounding
(``assert_correctly_rounded``): the per-channel scale is applied to the fp32 accumulator and
the result rounded once, so a kernel that rounds before the scale, or rounds the scale to the
activation dtype, fails; the share beyond half an ulp is recorded as ``beyond_half_ulp``.
Every tensor is tried in a layout of its own (``layout_cases``), and small cases expose each
term of the matmul and the dequantization.
"""

import inspect
import os
from collections.abc import Callable

import pytest
import torch

from kernels.quant import (
    ROW_BLOCK,
    dequantize_int8_rowwise,
    dequantize_int8_rowwise_reference,
    quantize_int8_rowwise,
    quantize_int8_rowwise_reference,
    w8a16_matmul,
    w8a16_reference,
)
from roofwatch.checks import IGNORE_RECORD_PROPERTY_WARNING, record_errors
from roofwatch.exposure import assert_exposes
from roofwatch.layouts import LayoutCase, layout_cases, place
from roofwatch.rounding import RoundingStats, assert_correctly_rounded, record_rounding
from roofwatch.tolerances import Tolerance, assert_close, assert_within_torch_error, dtype_name, tolerance_for

# See test_softmax.py: roofwatch reads record_property from xunit2 reports despite the warning.
pytestmark = IGNORE_RECORD_PROPERTY_WARNING

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SEEDS = [0, 1]
POISON_Q = -128

# A single element, a row shorter than any block, a non-power of two, and rows longer than
# one block that end mid-block.
QUANT_SHAPES: list[tuple[int, int]] = [(1, 1), (1, 7), (5, 1000), (3, 5000)]
assert any(cols > ROW_BLOCK and cols % ROW_BLOCK for _, cols in QUANT_SHAPES)

InputMaker = Callable[[tuple[int, int], torch.dtype, torch.Generator], torch.Tensor]


def _randn(shape: tuple[int, int], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=gen)


def _large(shape: tuple[int, int], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    # Near the top of each dtype's range, clamped so no draw becomes an input Inf.
    limit = torch.finfo(dtype).max
    return (torch.randn(shape, generator=gen) * limit / 8).clamp(-limit, limit)


def _zero_rows(shape: tuple[int, int], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    # Row 0 is all zeros (scale 0, which must not turn into 0 / 0); where there is a second
    # row it holds one nonzero value, so every other element rounds to exactly 0.
    x = torch.randn(shape, generator=gen)
    x[0] = 0.0
    if shape[0] > 1:
        x[1] = 0.0
        x[1, -1] = -3.0
    return x


def _ties(shape: tuple[int, int], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    # Every row has max |x| = 127, so scale = 1 exactly and x / scale is x: half-integers land
    # exactly between two steps and must round to the even one (2.5 -> 2, -1.5 -> -2).
    # They need 8 significant bits, which bf16 has.
    x = torch.randint(-253, 254, shape, generator=gen).to(torch.float32) / 2
    x[:, 0] = 127.0
    return x


DISTRIBUTIONS: dict[str, InputMaker] = {
    "randn": _randn,
    "large": _large,
    "zero_rows": _zero_rows,
    "ties": _ties,
}


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("dist", list(DISTRIBUTIONS))
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("shape", QUANT_SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_quantize_int8_rowwise(
    shape: tuple[int, int],
    dtype: torch.dtype,
    dist: str,
    seed: int,
    record_property: Callable[[str, object], None],
) -> None:
    gen = torch.Generator().manual_seed(seed)
    x = DISTRIBUTIONS[dist](shape, dtype, gen).to(dtype=dtype, device=DEVICE)
    x_before = x.clone()
    q = torch.full(shape, POISON_Q, dtype=torch.int8, device=DEVICE)
    scale = torch.full((shape[0],), float("nan"), device=DEVICE)

    quantize_int8_rowwise(x, out=(q, scale))

    assert torch.equal(x, x_before), "quantize_int8_rowwise modified its input"
    assert not (q == POISON_Q).any(), "q holds -128: an element was not written, or not clamped"
    q_ref, scale_ref = quantize_int8_rowwise_reference(x)
    assert torch.equal(scale, scale_ref), f"scale differs: max diff {(scale - scale_ref).abs().max().item():.3g}"
    mismatch = q != q_ref
    if mismatch.any():
        first = tuple(mismatch.nonzero()[0].tolist())
        raise AssertionError(
            f"{int(mismatch.sum())} of {q.numel()} q values differ from torch's half-to-even rounding; "
            f"first at {first}: got {q[first].item()}, expected {q_ref[first].item()} "
            f"(x / scale = {x[first].item() / scale[first[0]].item():.6g})"
        )
    # Round trip in fp64: each element lands within half a step. The slack covers the fp32
    # rounding of x / scale before it is rounded to an integer (|x / scale| <= 127).
    x64, s64 = x.to(torch.float64), scale.to(torch.float64)[:, None]
    err = (q.to(torch.float64) * s64 - x64).abs()
    bound = s64 * (0.5 + 2.0**-16)
    assert (err <= bound).all(), f"round-trip error {float((err / s64).max()):.6g} steps exceeds 1/2"
    record_property("max_abs_err", float(err.max()))
    record_property("max_err_in_steps", float((err / s64.clamp_min(torch.finfo(torch.float32).tiny)).max()))


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("shape", [(1, 7), (5, 1000), (3, 2500)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_dequantize_int8_rowwise(
    shape: tuple[int, int], dtype: torch.dtype, record_property: Callable[[str, object], None]
) -> None:
    gen = torch.Generator().manual_seed(0)
    q = torch.randint(-127, 128, shape, generator=gen, dtype=torch.int8).to(DEVICE)
    scale = (torch.rand(shape[0], generator=gen) * 0.1).to(DEVICE)
    scale[0] = 0.0
    q_before, scale_before = q.clone(), scale.clone()
    out = torch.full(shape, float("nan"), dtype=dtype, device=DEVICE)

    dequantize_int8_rowwise(q, scale, dtype, out=out)

    assert torch.equal(q, q_before) and torch.equal(scale, scale_before), "dequantize modified its inputs"
    expected = dequantize_int8_rowwise_reference(q, scale)
    errors = assert_close(out, expected, tolerance_for(dtype))
    record_errors(record_property, errors)
    if dtype != torch.float32:
        # One fp32 product, then the store.
        record_rounding(record_property, assert_correctly_rounded(out, expected, fp32_ulps=1))


# (M, N, K): a single token (decode) and a batch; no dimension is a multiple of a block.
MATMUL_SHAPES: list[tuple[int, int, int]] = [(1, 33, 70), (20, 40, 100)]
MATMUL_DTYPES = [torch.float16, torch.bfloat16]


def _matmul_inputs(
    shape: tuple[int, int, int], dtype: torch.dtype, dist: str, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    m, n, k = shape
    a = torch.randn((m, k), generator=gen)
    w = torch.randn((n, k), generator=gen) / k**0.5
    if dist == "outliers":
        # Output channels three decades apart in magnitude (so are their scales), and a few
        # activation channels 30x the rest, as LLM activations have.
        w *= 10.0 ** torch.empty((n, 1)).uniform_(-2, 1, generator=gen)
        a[:, :: max(k // 4, 1)] *= 30.0
    w_q, scale = quantize_int8_rowwise_reference(w)
    return a.to(dtype=dtype, device=DEVICE), w_q.to(DEVICE), scale.to(DEVICE)


def _check_matmul_rounding(out: torch.Tensor, a: torch.Tensor, w_q: torch.Tensor, scale: torch.Tensor
                           ) -> RoundingStats:
    # Exact products of widened int8 and fp16/bf16 values, K fp32 additions (up to one ulp each
    # where tensor cores truncate), one multiply by the scale: 2 K + 8 fp32 ulps of the terms.
    # Under the interpreter bf16 tiles are multiplied in fp32 (it would multiply raw bf16 bit
    # patterns) and fp16 ones by numpy with fp32 accumulators: the same products and sums; its
    # bf16 store truncates, which kernel_store_rounding makes the bound.
    w = dequantize_int8_rowwise_reference(w_q, scale)
    terms = a.double().abs() @ w.abs().T
    return assert_correctly_rounded(out, w8a16_reference(a, w_q, scale), terms=terms, fp32_ulps=2 * a.shape[1] + 8)


def _truncation_slack(dtype: torch.dtype, reference: torch.Tensor) -> float:
    # Under the interpreter a bf16 store truncates (on the GPU it rounds to nearest), which
    # can cost one more ulp of the output than torch's rounding does: 2**-7 of the largest.
    if INTERPRETING and dtype == torch.bfloat16:
        return 2.0**-7 * float(reference.abs().max())
    return 1e-5


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("dist", ["randn", "outliers"])
@pytest.mark.parametrize("dtype", MATMUL_DTYPES, ids=dtype_name)
@pytest.mark.parametrize("shape", MATMUL_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_w8a16_matmul(
    shape: tuple[int, int, int],
    dtype: torch.dtype,
    dist: str,
    seed: int,
    record_property: Callable[[str, object], None],
) -> None:
    a, w_q, scale = _matmul_inputs(shape, dtype, dist, seed)
    inputs_before = [t.clone() for t in (a, w_q, scale)]
    out = torch.full((shape[0], shape[1]), float("nan"), dtype=dtype, device=DEVICE)

    w8a16_matmul(a, w_q, scale, out=out)

    assert all(torch.equal(t, b) for t, b in zip((a, w_q, scale), inputs_before)), "w8a16_matmul modified an input"
    reference = w8a16_reference(a, w_q, scale)
    torch_result = a @ dequantize_int8_rowwise_reference(w_q, scale, dtype).T
    errors = assert_within_torch_error(out, torch_result, reference, atol=_truncation_slack(dtype, reference))
    record_errors(record_property, errors)
    record_property("torch_max_abs_err", float((torch_result.to(torch.float64) - reference).abs().max()))
    record_rounding(record_property, _check_matmul_rounding(out, a, w_q, scale))


def test_w8a16_matmul_strided_activations() -> None:
    # A transposed view: activations with a unit stride along M, not K.
    a_buffer = torch.randn((70, 5), generator=torch.Generator().manual_seed(0)).to(torch.float16).to(DEVICE)
    _, w_q, scale = _matmul_inputs((5, 33, 70), torch.float16, "randn", 0)
    a = a_buffer.t()
    reference = w8a16_reference(a, w_q, scale)
    torch_result = a @ dequantize_int8_rowwise_reference(w_q, scale, torch.float16).T
    assert_within_torch_error(w8a16_matmul(a, w_q, scale), torch_result, reference)


# Layouts as a test dimension (roofwatch.layouts): every tensor of each call in a layout of its
# own, so a kernel addressing one with another's stride fails. Inputs take any layout (a
# non-unit column stride is copied first, scales are made contiguous); quantize's q and scale
# and dequantize's output need unit-stride rows, and other layouts are refused; the matmul's
# output takes any strides.
QUANTIZE_LAYOUTS = {"x": ["contiguous", "padded", "transposed", "strided"], "q": ["contiguous", "padded"],
                    "scale": ["contiguous", "padded"]}
DEQUANTIZE_LAYOUTS = {"q": ["contiguous", "padded", "transposed", "strided"],
                      "scale": ["contiguous", "padded", "strided"], "out": ["contiguous", "padded"]}
MATMUL_LAYOUTS = {name: ["contiguous", "padded", "transposed", "strided"] for name in ("a", "w_q", "out")}
MATMUL_LAYOUTS["scale"] = ["contiguous", "padded", "strided"]
REFUSED = {
    ("quantize", "q", "transposed"): "q must be contiguous along its last dimension",
    ("quantize", "q", "strided"): "q must be contiguous along its last dimension",
    ("quantize", "scale", "strided"): "scale must be contiguous",
    ("dequantize", "out", "transposed"): "out must be contiguous along its last dimension",
    ("dequantize", "out", "strided"): "out must be contiguous along its last dimension",
}


@pytest.mark.parametrize("cols", [1000, ROW_BLOCK + 100])
@pytest.mark.parametrize("case", layout_cases(QUANTIZE_LAYOUTS), ids=str)
def test_quantize_layouts(case: LayoutCase, cols: int) -> None:
    x = torch.randn((3, cols), generator=torch.Generator().manual_seed(0)).to(dtype=torch.float16, device=DEVICE)
    placed = {"x": case.input("x", x), "q": case.output("q", x.to(torch.int8), fill=POISON_Q),
              "scale": case.output("scale", x[:, 0].float())}

    quantize_int8_rowwise(placed["x"].tensor, out=(placed["q"].tensor, placed["scale"].tensor))

    for name, tensor in placed.items():
        tensor.assert_outside_intact(name)
    q_ref, scale_ref = quantize_int8_rowwise_reference(x)
    assert torch.equal(placed["scale"].tensor, scale_ref) and torch.equal(placed["q"].tensor, q_ref)


@pytest.mark.parametrize("case", layout_cases(DEQUANTIZE_LAYOUTS), ids=str)
def test_dequantize_layouts(case: LayoutCase, record_property: Callable[[str, object], None]) -> None:
    gen = torch.Generator().manual_seed(0)
    q = torch.randint(-127, 128, (5, 1030), generator=gen, dtype=torch.int8).to(DEVICE)
    scale = (torch.rand(5, generator=gen) * 0.1).to(DEVICE)
    placed = {"q": case.input("q", q), "scale": case.input("scale", scale),
              "out": case.output("out", q.to(torch.float16))}

    dequantize_int8_rowwise(placed["q"].tensor, placed["scale"].tensor, torch.float16, out=placed["out"].tensor)

    for name, tensor in placed.items():
        tensor.assert_outside_intact(name)
    expected = dequantize_int8_rowwise_reference(q, scale)
    record_errors(record_property, assert_close(placed["out"].tensor, expected, tolerance_for(torch.float16)))
    record_rounding(record_property, assert_correctly_rounded(placed["out"].tensor, expected, fp32_ulps=1))


@pytest.mark.parametrize("case", layout_cases(MATMUL_LAYOUTS), ids=str)
def test_w8a16_matmul_layouts(case: LayoutCase, record_property: Callable[[str, object], None]) -> None:
    a, w_q, scale = _matmul_inputs((20, 40, 100), torch.float16, "outliers", 0)
    placed = {"a": case.input("a", a), "w_q": case.input("w_q", w_q), "scale": case.input("scale", scale),
              "out": case.output("out", torch.empty((20, 40), dtype=torch.float16, device=DEVICE))}

    w8a16_matmul(placed["a"].tensor, placed["w_q"].tensor, placed["scale"].tensor, out=placed["out"].tensor)

    for name, tensor in placed.items():
        tensor.assert_outside_intact(name)
    reference = w8a16_reference(a, w_q, scale)
    torch_result = a @ dequantize_int8_rowwise_reference(w_q, scale, torch.float16).T
    record_errors(record_property, assert_within_torch_error(placed["out"].tensor, torch_result, reference))
    record_rounding(record_property, _check_matmul_rounding(placed["out"].tensor, a, w_q, scale))


@pytest.mark.parametrize(("op", "tensor", "layout"), list(REFUSED), ids=str)
def test_quant_refuses_layouts_it_cannot_write(op: str, tensor: str, layout: str) -> None:
    x = torch.randn((4, 40), device=DEVICE)
    if op == "quantize":
        outputs = {"q": torch.empty((4, 40), dtype=torch.int8, device=DEVICE),
                   "scale": torch.empty(4, device=DEVICE)}
        fill = {"q": POISON_Q, "scale": float("nan")}[tensor]
        bad = place(torch.full_like(outputs[tensor], fill), layout, fill=fill)
        outputs[tensor] = bad.tensor
        with pytest.raises(ValueError, match=REFUSED[op, tensor, layout]):
            quantize_int8_rowwise(x, out=(outputs["q"], outputs["scale"]))
    else:
        q, scale = quantize_int8_rowwise(x)
        bad = place(torch.full_like(x, float("nan")), layout)
        with pytest.raises(ValueError, match=REFUSED[op, tensor, layout]):
            dequantize_int8_rowwise(q, scale, torch.float32, out=bad.tensor)
    bad.assert_outside_intact(tensor)


# Sizes that expose every term (roofwatch.exposure): what a kernel with one parameter's term
# wrong would compute, told apart in both activation dtypes by the bound each case holds it to.
# Quantization is compared bit for bit with torch, which exposes any wrong term of it.
MATMUL_ALTERNATIVES: dict[str, tuple[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]]] = {
    "the first row of activations for every row": ("a", lambda a, w, s: w8a16_reference(a[:1].expand_as(a), w, s)),
    "the weights' last column dropped (K mask off by one)":
        ("w_q", lambda a, w, s: w8a16_reference(a[:, :-1], w[:, :-1], s)),
    "int8 weights read as unsigned":
        ("w_q", lambda a, w, s: a.double() @ ((w.double() % 256) * s.double()[:, None]).T),
    "the first channel's scale for every channel": ("scale", lambda a, w, s: w8a16_reference(a, w, s[:1].expand_as(s))),
}
DEQUANTIZE_ALTERNATIVES: dict[str, tuple[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]] = {
    "int8 read as unsigned": ("q", lambda q, s: (q.double() % 256) * s.double()[:, None]),
    "the first row's scale for every row":
        ("scale", lambda q, s: dequantize_int8_rowwise_reference(q, s[:1].expand_as(s))),
}


def test_every_parameter_has_a_term_exposed() -> None:
    assert {p for p, _ in MATMUL_ALTERNATIVES.values()} == set(inspect.signature(w8a16_matmul).parameters) - {"out"}
    # dequantize's dtype is the output's, which every dtype case checks.
    assert {p for p, _ in DEQUANTIZE_ALTERNATIVES.values()} == \
        set(inspect.signature(dequantize_int8_rowwise).parameters) - {"out", "dtype"}


@pytest.mark.parametrize("dtype", MATMUL_DTYPES, ids=dtype_name)
def test_quant_exposes_every_term(dtype: torch.dtype, record_property: Callable[[str, object], None]) -> None:
    a, w_q, scale = _matmul_inputs((5, 7, 9), dtype, "outliers", 0)
    out = w8a16_matmul(a, w_q, scale)
    reference = w8a16_reference(a, w_q, scale)
    torch_result = a @ dequantize_int8_rowwise_reference(w_q, scale, dtype).T
    torch_error = float((torch_result.double() - reference).abs().max())
    bound = Tolerance(atol=2 * torch_error + _truncation_slack(dtype, reference), rtol=0.0)
    assert_exposes(reference, {name: compute(a, w_q, scale) for name, (_, compute) in MATMUL_ALTERNATIVES.items()},
                   bound)
    record_errors(record_property, assert_within_torch_error(out, torch_result, reference,
                                                             atol=_truncation_slack(dtype, reference)))

    q, row_scale = w_q[:4], scale[:4]
    dequantized = dequantize_int8_rowwise(q, row_scale, dtype)
    expected = dequantize_int8_rowwise_reference(q, row_scale)
    assert_exposes(expected, {name: compute(q, row_scale) for name, (_, compute) in DEQUANTIZE_ALTERNATIVES.items()},
                   tolerance_for(dtype))
    assert_close(dequantized, expected, tolerance_for(dtype))


def test_quant_rejects_bad_arguments() -> None:
    x = torch.randn((4, 8), device=DEVICE)
    with pytest.raises(ValueError, match="2-D"):
        quantize_int8_rowwise(x[None])
    with pytest.raises(TypeError):
        quantize_int8_rowwise(x.double())
    with pytest.raises(ValueError, match="q must be"):
        quantize_int8_rowwise(x, out=(torch.empty((4, 8), device=DEVICE), torch.empty(4, device=DEVICE)))
    q, scale = quantize_int8_rowwise(x)
    with pytest.raises(ValueError, match="scale must be"):
        dequantize_int8_rowwise(q, scale[:2])
    a = torch.randn((2, 8), device=DEVICE).to(torch.float16)
    with pytest.raises(TypeError, match="activations"):
        w8a16_matmul(a.float(), q, scale)
    with pytest.raises(TypeError, match="int8"):
        w8a16_matmul(a, q.to(torch.float16), scale)
    with pytest.raises(ValueError, match="inner dimensions"):
        w8a16_matmul(a[:, :7], q, scale)
