"""Benchmarks of the memory-bound kernels: the copy/add bandwidth probes, SwiGLU and RoPE.

Each is timed as ``triton`` (ours), ``torch`` (eager: ``x.clone()``, ``torch.add``,
``F.silu(g) * u``, transformers' ``rotate_half`` formula) and ``torch.compile`` (the eager code
through inductor, compiled before timing starts). Every benchmark reports its work per call in
``extra_info`` (``flops``, ``bytes``, the compulsory traffic, the same for every impl) plus
``dtype``, ``shape`` and ``impl``; ``torch.compile`` cases add ``compile_s``. On a GPU the
shapes are large enough to saturate HBM (each tensor far above L2, so the write-back is
timed too); on CPU the Triton interpreter runs each program in Python, so they shrink.
"""

import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import pytest
import torch
import torch.nn.functional as F
from _pytest.mark import ParameterSet

from kernels.copy import add, add_bytes, add_flops, copy, copy_bytes, copy_flops
from kernels.rotary import rotary, rotary_bytes, rotary_flops
from kernels.swiglu import swiglu, swiglu_bytes, swiglu_flops
from roofwatch.harness import KernelBenchmark
from roofwatch.tolerances import dtype_name

ON_GPU = torch.cuda.is_available()
DEVICE = "cuda" if ON_GPU else "cpu"


class RotaryShape(NamedTuple):
    batch: int
    seq: int
    q_heads: int
    k_heads: int
    head_dim: int


if ON_GPU:
    # 2**26 and 2**28 elements: 256 MiB and 1 GiB per fp32 tensor, 5x and 20x the H200's L2.
    SIZES = [2**26, 2**28]
    # (tokens, intermediate) of the Llama-3 8B MLP on a 4096-token batch, and of Llama-3 70B.
    SWIGLU_SHAPES = [(4096, 14_336), (8192, 28_672)]
    # Llama-2 7B (32 heads of 128, no GQA) and Llama-3 8B (8 kv heads) on 8 x 4096 tokens;
    # head_dim 64 with 16 heads.
    ROTARY_SHAPES = [
        RotaryShape(8, 4096, 32, 32, 128),
        RotaryShape(8, 4096, 32, 8, 128),
        RotaryShape(16, 2048, 16, 16, 64),
    ]
else:
    SIZES = [2**16]
    SWIGLU_SHAPES = [(32, 1000)]
    ROTARY_SHAPES = [RotaryShape(1, 4, 8, 2, 64)]
DTYPES = [torch.float32, torch.bfloat16]
IMPLS = ["triton", "torch", "torch.compile"]


def _wanted(impl: str, first_shape: bool, dtype: torch.dtype) -> bool:
    # torch.compile is a GPU baseline. On CPU inductor needs ~15 s to start up and seconds per
    # new graph (a C++ compile each), longer than everything else in this file together, and an
    # interpreted Triton kernel compared with compiled C++ says nothing about either.
    return ON_GPU or impl != "torch.compile"


def _cases(shapes: Sequence[object], shape_id: Callable[[Any], str]) -> list[ParameterSet]:
    return [
        pytest.param(impl, shape, dtype, id=f"{impl}-{shape_id(shape)}-{dtype_name(dtype)}")
        for i, shape in enumerate(shapes)
        for dtype in DTYPES
        for impl in IMPLS
        if _wanted(impl, i == 0, dtype)
    ]


def _size_id(n: int) -> str:
    return str(n)


def _swiglu_id(shape: tuple[int, int]) -> str:
    return f"{shape[0]}x{shape[1]}"


def _rotary_id(shape: RotaryShape) -> str:
    # batch x seq x q_heads x k_heads x head_dim
    return "x".join(map(str, shape))


def _random(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    # Random inputs (never zeros, which some hardware moves or multiplies faster), allocated
    # once outside the timed region, from a fixed seed so every run times the same data.
    # Drawn on the device: a GiB of normals takes seconds on the host and would dominate the
    # suite's run time on a GPU.
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    return torch.randn(shape, generator=gen, device=DEVICE, dtype=dtype)


def _synchronize() -> None:
    if ON_GPU:
        torch.cuda.synchronize()


def _baseline(
    impl: str, op: Callable[..., object], args: tuple[torch.Tensor, ...], kernel_benchmark: KernelBenchmark
) -> Callable[[], object]:
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
    _synchronize()
    kernel_benchmark.benchmark.extra_info["compile_s"] = time.perf_counter() - start
    return lambda: compiled(*args)


def _measure(
    kernel_benchmark: KernelBenchmark,
    kernel: str,
    impl: str,
    triton_call: Callable[[], object],
    torch_op: Callable[..., object],
    args: tuple[torch.Tensor, ...],
    *,
    flops: int,
    bytes: int,
    dtype: torch.dtype,
    shape: str,
) -> None:
    call = triton_call if impl == "triton" else _baseline(impl, torch_op, args, kernel_benchmark)
    result = kernel_benchmark(
        call,
        flops=flops,
        bytes=bytes,
        dtype=dtype_name(dtype),
        shape=shape,
        impl=impl,
        group=f"{kernel}-{shape}-{dtype_name(dtype)}",
    )
    # A benchmark of a wrong kernel is meaningless; this cheap check keeps a broken build
    # from posting timings (the correctness suite does the thorough comparison).
    outputs = result if isinstance(result, tuple) else (result,)
    assert all(isinstance(t, torch.Tensor) and torch.isfinite(t).all() for t in outputs)


@pytest.mark.parametrize(("impl", "n", "dtype"), _cases(SIZES, _size_id))
def test_copy(kernel_benchmark: KernelBenchmark, impl: str, n: int, dtype: torch.dtype) -> None:
    x = _random((n,), dtype, seed=0)
    out = torch.empty_like(x)
    _measure(
        kernel_benchmark, "copy", impl, lambda: copy(x, out=out), torch.clone, (x,),
        flops=copy_flops(n), bytes=copy_bytes(n, dtype), dtype=dtype, shape=_size_id(n),
    )


@pytest.mark.parametrize(("impl", "n", "dtype"), _cases(SIZES, _size_id))
def test_add(kernel_benchmark: KernelBenchmark, impl: str, n: int, dtype: torch.dtype) -> None:
    x, y = _random((n,), dtype, seed=0), _random((n,), dtype, seed=1)
    out = torch.empty_like(x)
    _measure(
        kernel_benchmark, "add", impl, lambda: add(x, y, out=out), torch.add, (x, y),
        flops=add_flops(n), bytes=add_bytes(n, dtype), dtype=dtype, shape=_size_id(n),
    )


def _swiglu_torch(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return F.silu(gate) * up


@pytest.mark.parametrize(("impl", "shape", "dtype"), _cases(SWIGLU_SHAPES, _swiglu_id))
def test_swiglu(kernel_benchmark: KernelBenchmark, impl: str, shape: tuple[int, int], dtype: torch.dtype) -> None:
    gate, up = _random(shape, dtype, seed=0), _random(shape, dtype, seed=1)
    out = torch.empty_like(gate)
    n = gate.numel()
    _measure(
        kernel_benchmark, "swiglu", impl, lambda: swiglu(gate, up, out=out), _swiglu_torch, (gate, up),
        flops=swiglu_flops(n), bytes=swiglu_bytes(n, dtype), dtype=dtype, shape=_swiglu_id(shape),
    )


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _rotary_torch(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    # transformers' apply_rotary_pos_emb, with (1, seq, 1, head_dim) tables.
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


@pytest.mark.parametrize(("impl", "shape", "dtype"), _cases(ROTARY_SHAPES, _rotary_id))
def test_rotary(kernel_benchmark: KernelBenchmark, impl: str, shape: RotaryShape, dtype: torch.dtype) -> None:
    batch, seq, q_heads, k_heads, head_dim = shape
    q = _random((batch, seq, q_heads, head_dim), dtype, seed=0)
    k = _random((batch, seq, k_heads, head_dim), dtype, seed=1)
    # Tables in the activation dtype, as transformers passes them; ours stores each angle
    # once, transformers' duplicates it across the two halves.
    inv_freq = 10_000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.arange(seq, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos, sin = (t.to(dtype=dtype, device=DEVICE) for t in (angles.cos(), angles.sin()))
    cos_full, sin_full = (torch.cat((t, t), dim=-1)[None, :, None, :] for t in (cos, sin))
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    _measure(
        kernel_benchmark, "rotary", impl, lambda: rotary(q, k, cos, sin, q_out=q_out, k_out=k_out),
        _rotary_torch, (q, k, cos_full, sin_full),
        flops=rotary_flops(*shape), bytes=rotary_bytes(*shape, dtype, table_dtype=dtype),
        dtype=dtype, shape=_rotary_id(shape),
    )
