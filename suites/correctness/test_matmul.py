"""Triton matmul against an fp64 torch reference, judged by torch's own same-dtype error.

A matmul's error grows with K and with the magnitudes involved, so a fixed tolerance is either
loose or flaky; instead each case may be at most ``K_TORCH`` times as far from the fp64
reference as ``torch.matmul`` in the same dtype on the same inputs (``assert_within_torch_error``).
Outputs are poisoned with NaN before the call, inputs must come back unchanged, and the
measured error is recorded as junit properties ``max_abs_err`` / ``max_rel_err``.

fp16 and bf16 outputs are also held to correct rounding (``assert_correctly_rounded``): the
fp32 accumulator is rounded once, so the output is the exact product rounded once, give or
take fp32's accumulation error (``2 K`` fp32 ulps of ``|a| @ |b|``); the share of elements
beyond half an ulp is recorded as ``beyond_half_ulp``. a, b and the output are tried in
layouts of their own (``layout_cases``); the kernel takes any strides for each.
"""

import inspect
import os
from collections.abc import Callable

import pytest
import torch

from kernels.matmul import FP8_DTYPE, fp8_unsupported_reason, matmul, matmul_reference
from roofwatch.checks import IGNORE_RECORD_PROPERTY_WARNING, record_errors, shape_id
from roofwatch.exposure import assert_exposes
from roofwatch.layouts import LayoutCase, layout_cases
from roofwatch.rounding import RoundingStats, assert_correctly_rounded, record_rounding
from roofwatch.tolerances import ErrorStats, Tolerance, assert_within_torch_error, dtype_name

# pytest's default junit family (xunit2) warns on record_property yet still writes the
# properties, which roofwatch reads; the warning says nothing useful on every case.
pytestmark = IGNORE_RECORD_PROPERTY_WARNING

ON_GPU = torch.cuda.is_available()
DEVICE = "cuda" if ON_GPU else "cpu"
INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"

# k = 2: the kernel and torch.matmul both accumulate in fp32 and round once to the output
# dtype, so they differ only in summation order. On CPU the fp16 error equalled torch's in all
# 72 cases tried (ratio 1.0; 11 of 18 randn outputs bit-identical); 2 leaves room for cuBLAS's
# other tilings and split-K. bf16 under the interpreter also needs the floor below.
K_TORCH = 2.0

# (M, N, K): each of 1, 17, 64 and 100 in every position. The interpreter's tiles are 32 wide,
# so 17 and 100 end mid-tile in M, N and K (the K-loop mask), 64 is whole tiles, 1 is a
# single row/column, and 100 rows make 4 tile rows: a full group of 3 and a partial one.
SHAPES: list[tuple[int, int, int]] = [
    (1, 1, 1),
    (17, 17, 17),
    (64, 64, 64),
    (100, 100, 100),
    (1, 100, 17),
    (100, 17, 64),
    (17, 64, 100),
    (64, 1, 100),
    (100, 64, 1),
]
if ON_GPU and not INTERPRETED:
    # Past every autotuned tile: several groups of tile rows, K loops of many steps, and
    # edges that are no multiple of any block.
    SHAPES += [(1000, 1000, 1000), (4097, 513, 1031), (2048, 4096, 8192)]

DTYPES = [torch.float16, torch.bfloat16]
SEEDS = [0, 1]


def _torch_floor(expected: torch.Tensor, dtype: torch.dtype) -> float:
    """The ``atol`` floor of ``assert_within_torch_error`` for an output of ``dtype``.

    The interpreter casts fp32 -> bf16 by truncation (up to 1 ulp) where torch and the GPU
    round to nearest (up to 1/2 ulp): one bf16 ulp at the output's largest magnitude covers it.
    Measured on the CPU cases: the kernel's error exceeded 2 x torch's by at most 0.47 of that.
    """
    if INTERPRETED and dtype == torch.bfloat16:
        return torch.finfo(dtype).eps * float(expected.abs().max())
    return 1e-5


Pair = tuple[torch.Tensor, torch.Tensor]


def _randn(m: int, n: int, k: int, dtype: torch.dtype, gen: torch.Generator) -> Pair:
    a = torch.randn((m, k), generator=gen).to(dtype)
    return a, torch.randn((k, n), generator=gen).to(dtype)


def _large(m: int, n: int, k: int, dtype: torch.dtype, gen: torch.Generator) -> Pair:
    # Factors scaled to the dtype's range (s ~ 3e17 in bf16 and 4.5 in fp16 at K = 100, 45 in
    # fp16 at K = 1), so the products reach up to half of the largest finite value.
    # Clamping each factor to 4 sigma bounds every |C| by K * (4s)^2 = max / 2, so neither
    # the output nor torch's result overflows, however large K is.
    s = (torch.finfo(dtype).max / (32 * k)) ** 0.5
    a = (torch.randn((m, k), generator=gen) * s).clamp(-4 * s, 4 * s)
    b = (torch.randn((k, n), generator=gen) * s).clamp(-4 * s, 4 * s)
    return a.to(dtype), b.to(dtype)


DISTRIBUTIONS: dict[str, Callable[[int, int, int, torch.dtype, torch.Generator], Pair]] = {
    "randn": _randn,
    "large": _large,
}


def _make_inputs(shape: tuple[int, int, int], dtype: torch.dtype, dist: str, seed: int) -> Pair:
    gen = torch.Generator().manual_seed(seed)
    a, b = DISTRIBUTIONS[dist](*shape, dtype, gen)
    return a.to(DEVICE), b.to(DEVICE)


def _check(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> ErrorStats:
    expected = matmul_reference(a, b, torch.float64)
    return assert_within_torch_error(
        out, torch.matmul(a, b), expected, k=K_TORCH, atol=_torch_floor(expected, out.dtype)
    )


def _check_rounding(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> RoundingStats:
    # Products of fp16/bf16 values are exact in fp32; each of the K additions rounds, by up to
    # one fp32 ulp of the running sum where tensor cores truncate: 2 K ulps of |a| @ |b| (the
    # usual bound, Higham ch. 3), plus a few for the tile sums. The interpreter differs from a
    # GPU in two ways, and the check holds on both: it multiplies bf16 operands as raw bit
    # patterns, so the kernel upcasts them to fp32 there (the same exact products), and numpy
    # takes fp16 tile products with fp32 accumulators, as the tensor cores do; its bf16 store
    # truncates, which kernel_store_rounding makes the bound.
    terms = a.double().abs() @ b.double().abs()
    return assert_correctly_rounded(out, matmul_reference(a, b, torch.float64), terms=terms,
                                    fp32_ulps=2 * a.shape[1] + 8)


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("dist", list(DISTRIBUTIONS))
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_matmul(
    shape: tuple[int, int, int],
    dtype: torch.dtype,
    dist: str,
    seed: int,
    record_property: Callable[[str, object], None],
) -> None:
    a, b = _make_inputs(shape, dtype, dist, seed)
    a_before, b_before = a.clone(), b.clone()
    out = torch.full((shape[0], shape[1]), float("nan"), dtype=dtype, device=DEVICE)

    result = matmul(a, b, out=out)

    assert result.data_ptr() == out.data_ptr(), "matmul must write into the out= tensor"
    assert torch.equal(a, a_before) and torch.equal(b, b_before), "matmul modified its inputs"
    errors = _check(out, a, b)
    record_errors(record_property, errors)
    record_rounding(record_property, _check_rounding(out, a, b))


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
def test_matmul_is_deterministic(dtype: torch.dtype) -> None:
    # The same inputs must give bit-identical outputs: roofwatch compares errors across commits,
    # and a kernel whose reduction order varied between runs would drift by itself.
    a, b = _make_inputs((100, 64, 100), dtype, "randn", 0)
    assert torch.equal(matmul(a, b), matmul(a, b))


def test_matmul_strided_operands_and_output(record_property: Callable[[str, object], None]) -> None:
    # Column-major operands (transposed views) and an output that is a window into a wider
    # NaN buffer: strides are honoured and no lane writes outside the window.
    gen = torch.Generator().manual_seed(0)
    a = torch.randn((33, 17), generator=gen).to(torch.float16).to(DEVICE).t()  # (17, 33), column-major
    b = torch.randn((40, 33), generator=gen).to(torch.float16).to(DEVICE).t()  # (33, 40)
    buffer = torch.full((17, 40 + 9), float("nan"), dtype=torch.float16, device=DEVICE)
    out = buffer[:, 4 : 4 + 40]

    matmul(a, b, out=out)

    errors = _check(out, a, b)
    assert buffer[:, :4].isnan().all() and buffer[:, 4 + 40 :].isnan().all()
    record_errors(record_property, errors)


# Layouts as a test dimension (roofwatch.layouts): a, b and out each in a layout of its own, so
# a kernel addressing one operand with the other's row stride fails. The kernel takes any
# strides for all three, so no layout is refused. 33 x 40 x 17 crosses a tile edge in M, N, K.
LAYOUTS = {name: ["contiguous", "padded", "transposed", "strided"] for name in ("a", "b", "out")}


@pytest.mark.parametrize("case", layout_cases(LAYOUTS), ids=str)
def test_matmul_layouts(case: LayoutCase, record_property: Callable[[str, object], None]) -> None:
    a, b = _make_inputs((33, 40, 17), torch.float16, "randn", 0)
    out = torch.empty((33, 40), dtype=a.dtype, device=DEVICE)
    placed = {"a": case.input("a", a), "b": case.input("b", b), "out": case.output("out", out)}

    matmul(placed["a"].tensor, placed["b"].tensor, out=placed["out"].tensor)

    for name, tensor in placed.items():
        tensor.assert_outside_intact(name)
    record_errors(record_property, _check(placed["out"].tensor, a, b))
    record_rounding(record_property, _check_rounding(placed["out"].tensor, a, b))


# Sizes that expose every term (roofwatch.exposure): a K-loop that drops the last term of a
# partial tile (an off-by-one mask), and b read as its transpose (its two strides swapped), told
# apart at 17 x 17 x 17 in both dtypes. The fp8 scales are exposed by test_matmul_fp8, on
# devices that run fp8.
ALTERNATIVES: dict[str, tuple[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]] = {
    "a's last column dropped": ("a", lambda a, b: a.double()[:, :-1] @ b.double()[:-1]),
    "b transposed": ("b", lambda a, b: a.double() @ b.double().t()),
}
FP8_ALTERNATIVES = {"scale_a ignored": "scale_a", "scale_b ignored": "scale_b"}


def test_every_parameter_has_a_term_exposed() -> None:
    parameters = set(inspect.signature(matmul).parameters) - {"out"}
    exposed = {param for param, _ in ALTERNATIVES.values()} | set(FP8_ALTERNATIVES.values())
    assert exposed == parameters


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
def test_matmul_exposes_every_term(dtype: torch.dtype, record_property: Callable[[str, object], None]) -> None:
    a, b = _make_inputs((17, 17, 17), dtype, "randn", 0)
    out = matmul(a, b)
    expected = matmul_reference(a, b, torch.float64)
    bound = Tolerance(atol=K_TORCH * float((torch.matmul(a, b).double() - expected).abs().max())
                      + _torch_floor(expected, dtype), rtol=0.0)
    assert_exposes(expected, {name: compute(a, b) for name, (_, compute) in ALTERNATIVES.items()}, bound)
    record_errors(record_property, _check(out, a, b))


@pytest.mark.parametrize("shape", [(0, 5, 3), (4, 0, 3), (4, 5, 0)], ids=shape_id)
def test_matmul_empty(shape: tuple[int, int, int]) -> None:
    m, n, k = shape
    a = torch.randn((m, k), device=DEVICE).to(torch.float16)
    b = torch.randn((k, n), device=DEVICE).to(torch.float16)
    out = torch.full((m, n), float("nan"), dtype=torch.float16, device=DEVICE)
    # An empty sum is zero, as torch.matmul gives for K = 0.
    assert torch.equal(matmul(a, b, out=out), torch.zeros((m, n), dtype=torch.float16, device=DEVICE))


FP8_SKIP = fp8_unsupported_reason(torch.device(DEVICE))
# torch._scaled_mm, the same-dtype baseline, wants a row-major A, a column-major B and every
# dimension a multiple of 16.
FP8_SHAPES = [(16, 16, 16), (256, 512, 128), (1024, 1024, 1024), (4096, 2048, 8192)]


def _to_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # Per-tensor scaling maps the largest |x| to e4m3's largest finite value, 448.
    scale = (x.abs().max() / torch.finfo(FP8_DTYPE).max).to(torch.float32).reshape(())
    return (x / scale).to(FP8_DTYPE), scale


@pytest.mark.skipif(FP8_SKIP is not None, reason=FP8_SKIP or "")
@pytest.mark.parametrize("shape", FP8_SHAPES, ids=shape_id)
def test_matmul_fp8(shape: tuple[int, int, int], record_property: Callable[[str, object], None]) -> None:
    m, n, k = shape
    gen = torch.Generator().manual_seed(0)
    a, scale_a = _to_fp8(torch.randn((m, k), generator=gen).to(DEVICE))
    b, scale_b = _to_fp8(torch.randn((n, k), generator=gen).to(DEVICE))
    b = b.t()  # column-major (k, n)
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEVICE)

    matmul(a, b, out=out, scale_a=scale_a, scale_b=scale_b)

    expected = matmul_reference(a, b, torch.float64, scale_a=scale_a, scale_b=scale_b)
    baseline = torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)
    errors = assert_within_torch_error(out, baseline, expected, k=K_TORCH)
    record_errors(record_property, errors)
    one = torch.ones_like(scale_a)
    bound = Tolerance(atol=K_TORCH * float((baseline.double() - expected).abs().max()) + 1e-5, rtol=0.0)
    assert_exposes(expected, {
        "scale_a ignored": matmul_reference(a, b, torch.float64, scale_a=one, scale_b=scale_b),
        "scale_b ignored": matmul_reference(a, b, torch.float64, scale_a=scale_a, scale_b=one),
    }, bound)


def test_matmul_rejects_bad_arguments() -> None:
    a = torch.randn((4, 3), device=DEVICE).to(torch.float16)
    b = torch.randn((3, 5), device=DEVICE).to(torch.float16)
    with pytest.raises(ValueError, match="inner dimensions"):
        matmul(a, a)
    with pytest.raises(ValueError, match="2-D"):
        matmul(a[None], b)
    with pytest.raises(TypeError):
        matmul(a.float(), b.float())
    with pytest.raises(ValueError, match="share dtype"):
        matmul(a, b.to(torch.bfloat16))
    with pytest.raises(ValueError, match="out must be"):
        matmul(a, b, out=torch.empty((4, 5), dtype=torch.bfloat16, device=DEVICE))
    with pytest.raises(ValueError, match="fp8 inputs only"):
        matmul(a, b, scale_a=torch.ones((), device=DEVICE))


@pytest.mark.skipif(FP8_SKIP is None, reason="this device runs fp8; test_matmul_fp8 checks it")
def test_matmul_fp8_refused_where_unsupported() -> None:
    a = torch.randn((16, 16), device=DEVICE).to(FP8_DTYPE)
    one = torch.ones((), device=DEVICE)
    with pytest.raises(RuntimeError, match="fp8 e4m3 matmul"):
        matmul(a, a, scale_a=one, scale_b=one)
