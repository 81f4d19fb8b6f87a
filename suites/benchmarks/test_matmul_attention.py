"""Benchmarks of the compute-bound kernels: the Triton matmul and flash-attention forward.

Each is timed as ``triton`` (ours), ``torch`` (``torch.matmul`` / ``torch._scaled_mm`` for fp8,
i.e. cuBLAS(Lt); ``F.scaled_dot_product_attention``, FlashAttention-2 for these dtypes and head
dims) and, on a GPU, ``torch.compile`` of the same eager code, compiled before timing starts.
Inductor's default mode lowers a lone matmul or SDPA call to the same extern kernel, so that
series shows what dynamo's guards and wrapper add and catches a compile that starts falling
back. Every benchmark reports its work per call in ``extra_info`` (``flops``, ``bytes``, the
compulsory traffic, the same for every impl) plus ``dtype``, ``shape`` and ``impl``;
``torch.compile`` cases add ``compile_s``. On a GPU the shapes fill every SM many times over;
on CPU the Triton interpreter runs each program in numpy, so one tiny shape each remains.
"""

import time
from collections.abc import Callable
from typing import NamedTuple

import pytest
import torch
import torch.nn.functional as F

from kernels.attention import attention, attention_bytes, attention_flops
from kernels.matmul import FP8_DTYPE, fp8_unsupported_reason, matmul, matmul_bytes, matmul_flops
from roofwatch.harness import KernelBenchmark
from roofwatch.tolerances import dtype_name

ON_GPU = torch.cuda.is_available()
DEVICE = "cuda" if ON_GPU else "cpu"
FP8_SKIP = fp8_unsupported_reason(torch.device(DEVICE))


class AttentionShape(NamedTuple):
    batch: int
    heads: int
    seq: int
    head_dim: int


if ON_GPU:
    # The sizes where bf16 GEMMs reach their plateau (4096³ is ~0.14 TFLOP, 8192³ ~1.1).
    MATMUL_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192)]
    # 16k tokens per batch at every sequence length (as in Triton's fused-attention tutorial):
    # batch x heads x seq/128 >= 4096 programs, many waves over the 132 SMs, while q, k, v
    # and o stay at 128 MiB (head_dim 64) or 256 MiB (128) each.
    ATTENTION_SHAPES = [
        AttentionShape(16_384 // seq, 32, seq, head_dim) for seq in (1024, 4096, 16_384) for head_dim in (64, 128)
    ]
    DTYPES = [torch.bfloat16, torch.float16]
    IMPLS = ["triton", "torch", "torch.compile"]
else:
    MATMUL_SHAPES = [(64, 64, 64)]
    ATTENTION_SHAPES = [AttentionShape(1, 2, 64, 64)]
    DTYPES = [torch.bfloat16]
    # No torch.compile on CPU: inductor's first compile here took 24-29 s (its start-up and a
    # C++ build), half this file's budget, for a series that would time the same extern call.
    IMPLS = ["triton", "torch"]


def _label(dtype: torch.dtype) -> str:
    return "fp8e4m3" if dtype == FP8_DTYPE else dtype_name(dtype)


def _matmul_id(shape: tuple[int, int, int]) -> str:
    return "x".join(map(str, shape))


def _attention_id(shape: AttentionShape, causal: bool) -> str:
    # batch x heads x seq x head_dim, then the mask.
    return "x".join(map(str, shape)) + ("-causal" if causal else "-full")


def _random(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    # Random inputs (never zeros, which some hardware moves or multiplies faster), allocated
    # once outside the timed region, from a fixed seed so every run times the same data.
    # Drawn on the device: at 8192² and 16k tokens a CPU draw would dominate the setup.
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    return torch.randn(shape, generator=gen, device=DEVICE)


def _baseline(impl: str, op: Callable[..., object], args: tuple[object, ...],
              kernel_benchmark: KernelBenchmark) -> Callable[[], object]:
    """``op(*args)`` as a no-argument call, eager or compiled (compiled here, untimed)."""
    if impl == "torch":
        return lambda: op(*args)
    # A fresh dynamo cache per case: no recompile limit reached across shapes (which would
    # silently fall back to eager) and no automatic dynamic shapes, so each shape gets the
    # specialised code a deployment would get.
    torch._dynamo.reset()
    compiled = torch.compile(op, dynamic=False, fullgraph=True)
    start = time.perf_counter()
    compiled(*args)
    if ON_GPU:
        torch.cuda.synchronize()
    kernel_benchmark.benchmark.extra_info["compile_s"] = time.perf_counter() - start
    return lambda: compiled(*args)


def _check_finite(result: object) -> None:
    # A benchmark of a wrong kernel is meaningless; this cheap check keeps a broken build
    # from posting timings (the correctness suite does the thorough comparison).
    assert isinstance(result, torch.Tensor) and torch.isfinite(result).all()


MATMUL_CASES = [
    pytest.param(impl, shape, dtype, id=f"{impl}-{_matmul_id(shape)}-{_label(dtype)}")
    for shape in MATMUL_SHAPES
    for dtype in DTYPES
    for impl in IMPLS
]


@pytest.mark.parametrize(("impl", "shape", "dtype"), MATMUL_CASES)
def test_matmul(kernel_benchmark: KernelBenchmark, impl: str, shape: tuple[int, int, int], dtype: torch.dtype) -> None:
    m, n, k = shape
    a, b = _random((m, k), seed=0).to(dtype), _random((k, n), seed=1).to(dtype)
    out = torch.empty((m, n), dtype=dtype, device=DEVICE)

    def triton_call() -> torch.Tensor:
        return matmul(a, b, out=out)

    call = triton_call if impl == "triton" else _baseline(impl, torch.matmul, (a, b), kernel_benchmark)
    result = kernel_benchmark(
        call,
        flops=matmul_flops(m, n, k),
        bytes=matmul_bytes(m, n, k, dtype),
        dtype=_label(dtype),
        shape=_matmul_id(shape),
        impl=impl,
        group=f"matmul-{_matmul_id(shape)}-{_label(dtype)}",
    )
    _check_finite(result)


def _scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    return torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)


FP8_CASES = [
    pytest.param(impl, shape, id=f"{impl}-{_matmul_id(shape)}-fp8e4m3")
    for shape in MATMUL_SHAPES
    # torch.compile lowers _scaled_mm to the same cuBLASLt call as eager; not worth a series.
    for impl in ("triton", "torch")
]


@pytest.mark.skipif(FP8_SKIP is not None, reason=FP8_SKIP or "")
@pytest.mark.parametrize(("impl", "shape"), FP8_CASES)
def test_matmul_fp8(kernel_benchmark: KernelBenchmark, impl: str, shape: tuple[int, int, int]) -> None:
    m, n, k = shape
    # Per-tensor scales from the data's range; B column-major, the layout fp8 tensor cores
    # (and torch._scaled_mm) read directly.
    a32, b32 = _random((m, k), seed=0), _random((n, k), seed=1)
    fp8_max = torch.finfo(FP8_DTYPE).max
    scale_a = (a32.abs().max() / fp8_max).reshape(())
    scale_b = (b32.abs().max() / fp8_max).reshape(())
    a, b = (a32 / scale_a).to(FP8_DTYPE), (b32 / scale_b).to(FP8_DTYPE).t()
    del a32, b32
    out = torch.empty((m, n), dtype=torch.bfloat16, device=DEVICE)

    def triton_call() -> torch.Tensor:
        return matmul(a, b, out=out, scale_a=scale_a, scale_b=scale_b)

    call = triton_call if impl == "triton" else _baseline(impl, _scaled_mm, (a, b, scale_a, scale_b), kernel_benchmark)
    result = kernel_benchmark(
        call,
        flops=matmul_flops(m, n, k),
        bytes=matmul_bytes(m, n, k, FP8_DTYPE),
        dtype=_label(FP8_DTYPE),
        shape=_matmul_id(shape),
        impl=impl,
        group=f"matmul-{_matmul_id(shape)}-fp8e4m3",
    )
    _check_finite(result)


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


ATTENTION_CASES = [
    pytest.param(impl, shape, causal, dtype, id=f"{impl}-{_attention_id(shape, causal)}-{dtype_name(dtype)}")
    for shape in ATTENTION_SHAPES
    for causal in (False, True)
    for dtype in DTYPES
    for impl in IMPLS
]


@pytest.mark.parametrize(("impl", "shape", "causal", "dtype"), ATTENTION_CASES)
def test_attention(
    kernel_benchmark: KernelBenchmark, impl: str, shape: AttentionShape, causal: bool, dtype: torch.dtype
) -> None:
    q, k, v = (_random(tuple(shape), seed=i).to(dtype) for i in range(3))
    out = torch.empty_like(q)

    def triton_call() -> torch.Tensor:
        return attention(q, k, v, causal, out=out)

    call = triton_call if impl == "triton" else _baseline(impl, _sdpa, (q, k, v, causal), kernel_benchmark)
    label = _attention_id(shape, causal)
    result = kernel_benchmark(
        call,
        flops=attention_flops(*shape, causal=causal),
        bytes=attention_bytes(*shape, dtype),
        dtype=dtype_name(dtype),
        shape=label,
        impl=impl,
        group=f"attention-{label}-{dtype_name(dtype)}",
    )
    _check_finite(result)
