"""Benchmarks of the Triton cross-entropy, int8 quantization and W8A16 matmul.

Each kernel is timed as ``triton`` (ours), ``torch`` (the same operation in eager torch) and
``torch.compile`` (that eager code through inductor, compiled before timing starts;
``compile_s`` in ``extra_info``). Cross-entropy is timed forward + backward, since its kernel
writes the gradient in the forward call: each sample is ``torch.autograd.grad(loss, logits)``,
which returns a fresh gradient instead of accumulating into ``.grad``. Every benchmark reports
its work per call in ``extra_info`` (``flops``, ``bytes``, the same for every impl) plus
``dtype``, ``shape`` and ``impl``, as the softmax benchmarks do; ``kernel_benchmark``
(``roofwatch.harness``) does the timing. On a GPU the shapes are LLM-sized (Llama vocabularies and
projections, decode to prefill batches); on CPU the Triton interpreter runs every program in
Python, so they shrink to keep the suite short.
"""

import functools
import time
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from _pytest.mark import ParameterSet

from kernels.cross_entropy import cross_entropy, cross_entropy_bytes, cross_entropy_flops
from kernels.quant import (
    quantize_bytes,
    quantize_flops,
    quantize_int8_rowwise,
    quantize_int8_rowwise_reference,
    w8a16_bytes,
    w8a16_flops,
    w8a16_matmul,
)
from roofwatch.harness import KernelBenchmark
from roofwatch.tolerances import dtype_name

# torch._dynamo's import calls deprecated torch.jit APIs; the warnings are torch's, not ours.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")

ON_GPU = torch.cuda.is_available()
DEVICE = "cuda" if ON_GPU else "cpu"
IMPLS = ["triton", "torch", "torch.compile"]

if ON_GPU:
    # Llama-2/Mistral (32k) and Llama-3 (128k) vocabularies on 4k and 16k tokens: 0.25-4 GiB
    # of bf16 logits, far past the L2.
    CE_SHAPES = [(4096, 32_000), (16_384, 32_000), (4096, 128_256), (16_384, 128_256)]
    # Llama-3 8B's attention and MLP-up weights.
    QUANT_SHAPES = [(4096, 4096), (14_336, 4096)]
    # Decode (M = 1, 16) is bound by reading the int8 weights, prefill (M = 4096) by the
    # tensor cores.
    MATMUL_SHAPES = [(m, n, k) for m in (1, 16, 4096) for n, k in ((4096, 4096), (14_336, 4096))]
else:
    # (2, 10_000) streams the vocabulary in more than one block.
    CE_SHAPES = [(8, 1000), (2, 10_000)]
    QUANT_SHAPES = [(16, 512)]
    MATMUL_SHAPES = [(1, 128, 256), (16, 128, 320)]
DTYPES = [torch.bfloat16]


def _compiled_here(shapes: list, shape: tuple[int, ...]) -> bool:
    # torch.compile is a GPU baseline, every shape compiled there. On CPU inductor's first
    # compile in a process took 15-45 s here (2 cores, cold cache) and the cross-entropy
    # backward 60-95 s, and an interpreted Triton kernel compared with compiled C++ says
    # nothing about either.
    return ON_GPU


def _shape_id(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


def _cases(shapes: list) -> list[ParameterSet]:
    return [
        pytest.param(impl, shape, dtype, id=f"{impl}-{_shape_id(shape)}-{dtype_name(dtype)}")
        for shape in shapes
        for dtype in DTYPES
        for impl in IMPLS
        if impl != "torch.compile" or _compiled_here(shapes, shape)
    ]


def _random(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    # Random inputs (never zeros, which some hardware moves or multiplies faster), allocated
    # once outside the timed region, from a fixed seed so every run times the same data.
    # Drawn on the device: 16k x 128k logits drawn on the CPU would dominate the setup.
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    return torch.randn(shape, generator=gen, device=DEVICE).to(dtype)


def _baseline(impl: str, op: Callable[..., object], args: tuple[object, ...],
              kernel_benchmark: KernelBenchmark) -> Callable[..., object]:
    """``op`` itself for ``torch``; compiled and run once (untimed) for ``torch.compile``."""
    if impl == "torch":
        return op
    # A fresh dynamo cache per case: no recompile limit reached across shapes and no automatic
    # dynamic shapes, so each shape gets the specialised code a deployment would get.
    torch._dynamo.reset()
    compiled = torch.compile(op, dynamic=False)
    start = time.perf_counter()
    result = compiled(*args)
    if isinstance(result, torch.Tensor) and result.requires_grad:
        # Cross-entropy: AOTAutograd compiles the backward on its first call.
        torch.autograd.grad(result, [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad])
    if ON_GPU:
        torch.cuda.synchronize()
    kernel_benchmark.benchmark.extra_info["compile_s"] = time.perf_counter() - start
    return compiled


def _check_finite(result: object) -> None:
    # A benchmark of a wrong kernel is meaningless; this cheap check keeps a broken build
    # from posting timings (the correctness suite does the thorough comparison).
    tensors = result if isinstance(result, tuple) else (result,)
    assert all(isinstance(t, torch.Tensor) and torch.isfinite(t.float()).all() for t in tensors)


def _eager_cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, target)


def _eager_w8a16(a: torch.Tensor, w_q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return a @ w_q.to(a.dtype).T * scale.to(a.dtype)


@pytest.mark.parametrize(("impl", "shape", "dtype"), _cases(CE_SHAPES))
def test_cross_entropy(
    kernel_benchmark: KernelBenchmark, impl: str, shape: tuple[int, int], dtype: torch.dtype
) -> None:
    tokens, vocab = shape
    logits = _random(shape, dtype, seed=0).requires_grad_(True)
    target = torch.randint(0, vocab, (tokens,), generator=torch.Generator().manual_seed(1)).to(DEVICE)
    loss_fn = cross_entropy if impl == "triton" else _baseline(impl, _eager_cross_entropy, (logits, target),
                                                               kernel_benchmark)

    def forward_backward() -> torch.Tensor:
        (grad,) = torch.autograd.grad(loss_fn(logits, target), logits)
        return grad

    result = kernel_benchmark(
        forward_backward,
        flops=cross_entropy_flops(tokens, vocab),
        bytes=cross_entropy_bytes(tokens, vocab, dtype),
        dtype=dtype_name(dtype),
        shape=_shape_id(shape),
        impl=impl,
        group=f"cross_entropy-{_shape_id(shape)}-{dtype_name(dtype)}",
    )
    _check_finite(result)


@pytest.mark.parametrize(("impl", "shape", "dtype"), _cases(QUANT_SHAPES))
def test_quantize_int8_rowwise(
    kernel_benchmark: KernelBenchmark, impl: str, shape: tuple[int, int], dtype: torch.dtype
) -> None:
    rows, cols = shape
    x = _random(shape, dtype, seed=0)
    out = (torch.empty(shape, dtype=torch.int8, device=DEVICE), torch.empty(rows, device=DEVICE))
    if impl == "triton":
        quantize = functools.partial(quantize_int8_rowwise, out=out)
    else:
        quantize = _baseline(impl, quantize_int8_rowwise_reference, (x,), kernel_benchmark)

    result = kernel_benchmark(
        functools.partial(quantize, x),
        flops=quantize_flops(rows, cols),
        bytes=quantize_bytes(rows, cols, dtype),
        dtype=dtype_name(dtype),
        shape=_shape_id(shape),
        impl=impl,
        group=f"quantize_int8-{_shape_id(shape)}-{dtype_name(dtype)}",
    )
    _check_finite(result)


@pytest.mark.parametrize(("impl", "shape", "dtype"), _cases(MATMUL_SHAPES))
def test_w8a16_matmul(
    kernel_benchmark: KernelBenchmark, impl: str, shape: tuple[int, int, int], dtype: torch.dtype
) -> None:
    m, n, k = shape
    a = _random((m, k), dtype, seed=0)
    w_q, scale = quantize_int8_rowwise_reference(_random((n, k), torch.float32, seed=1) / k**0.5)
    out = torch.empty((m, n), dtype=dtype, device=DEVICE)
    if impl == "triton":
        matmul = functools.partial(w8a16_matmul, out=out)
    else:
        matmul = _baseline(impl, _eager_w8a16, (a, w_q, scale), kernel_benchmark)

    result = kernel_benchmark(
        functools.partial(matmul, a, w_q, scale),
        flops=w8a16_flops(m, n, k),
        bytes=w8a16_bytes(m, n, k, dtype),
        dtype=dtype_name(dtype),
        shape=_shape_id(shape),
        impl=impl,
        group=f"w8a16_matmul-{_shape_id(shape)}-{dtype_name(dtype)}",
    )
    _check_finite(result)
