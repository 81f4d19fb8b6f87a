"""Benchmarks of the Triton RMSNorm and LayerNorm, forward and backward.

Each is timed as ``triton`` (ours, through its autograd function), ``torch`` (eager
``F.rms_norm`` / ``F.layer_norm``) and ``torch.compile`` (the eager call through inductor,
compiled before timing starts; ``compile_s`` in ``extra_info``). The backward is timed alone:
the forward runs once outside the timed region, and each sample is
``torch.autograd.grad(y, inputs, grad_out, retain_graph=True)``, which returns fresh gradients
instead of accumulating into ``.grad``. Every benchmark reports its work per call in
``extra_info`` (``flops``, ``bytes``, the compulsory traffic, the same for every impl) plus
``dtype``, ``shape`` and ``impl``, as the softmax benchmarks do; ``kernel_benchmark``
(``roofwatch.harness``) does the timing.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from _pytest.mark import ParameterSet

from kernels.layernorm import (
    layernorm,
    layernorm_backward_bytes,
    layernorm_backward_flops,
    layernorm_bytes,
    layernorm_flops,
)
from kernels.rmsnorm import (
    MAX_FUSED_COLS,
    rmsnorm,
    rmsnorm_backward_bytes,
    rmsnorm_backward_flops,
    rmsnorm_bytes,
    rmsnorm_flops,
)
from roofwatch.harness import KernelBenchmark
from roofwatch.tolerances import dtype_name

# torch._dynamo's import calls deprecated torch.jit APIs; the warnings are torch's, not ours.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")

ON_GPU = torch.cuda.is_available()
DEVICE = "cuda" if ON_GPU else "cpu"

if ON_GPU:
    # (tokens, hidden): Llama-3 8B's hidden size on 16k tokens, 70B's on 8k, 405B's on 4k.
    # 64M elements each, 128 MiB per bf16 tensor, well above the H200's L2; the last row is
    # past MAX_FUSED_COLS, so the streamed kernels are timed too.
    SHAPES = [(16_384, 4096), (8192, 8192), (4096, 16_384)]
else:
    # The Triton interpreter runs every program in Python: few rows. (2, 9000) is past the
    # single-block cap.
    SHAPES = [(4, 1024), (2, 9000)]
assert any(cols > MAX_FUSED_COLS for _, cols in SHAPES)
DTYPES = [torch.bfloat16]
IMPLS = ["triton", "torch", "torch.compile"]
DIRECTIONS = ["forward", "backward"]


def _wanted(kernel: str, impl: str, first_shape: bool) -> bool:
    # torch.compile is a GPU baseline. On CPU inductor's first compile in a process took 25-55 s
    # here (2 cores, cold cache), each further graph 5-10 s, and an interpreted Triton kernel
    # compared with compiled C++ says nothing about either.
    return ON_GPU or impl != "torch.compile"


def _shape_id(shape: tuple[int, int]) -> str:
    return f"{shape[0]}x{shape[1]}"


def _cases(kernel: str) -> list[ParameterSet]:
    return [
        pytest.param(direction, impl, shape, dtype, id=f"{direction}-{impl}-{_shape_id(shape)}-{dtype_name(dtype)}")
        for i, shape in enumerate(SHAPES)
        for dtype in DTYPES
        for direction in DIRECTIONS
        for impl in IMPLS
        if _wanted(kernel, impl, i == 0)
    ]


@dataclass(frozen=True)
class _Norm:
    """What the benchmarks need to know about one normalization."""

    name: str
    triton: Callable[..., torch.Tensor]
    torch: Callable[..., torch.Tensor]
    n_params: int  # weight, or weight and bias
    flops: Callable[[int, int], int]
    bytes: Callable[[int, int, torch.dtype], int]
    backward_flops: Callable[[int, int], int]
    backward_bytes: Callable[[int, int, torch.dtype], int]


RMS_EPS = 1e-6
LAYERNORM_EPS = 1e-5


def _rmsnorm_torch(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.rms_norm(x, x.shape[-1:], weight, RMS_EPS)


def _layernorm_torch(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], weight, bias, LAYERNORM_EPS)


RMSNORM = _Norm(
    "rmsnorm", lambda x, w: rmsnorm(x, w, RMS_EPS), _rmsnorm_torch, 1,
    rmsnorm_flops, rmsnorm_bytes, rmsnorm_backward_flops, rmsnorm_backward_bytes,
)
LAYERNORM = _Norm(
    "layernorm", lambda x, w, b: layernorm(x, w, b, LAYERNORM_EPS), _layernorm_torch, 2,
    layernorm_flops, layernorm_bytes, layernorm_backward_flops, layernorm_backward_bytes,
)


def _random(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    # Random inputs (never zeros, which some hardware moves or multiplies faster), allocated
    # once outside the timed region, from a fixed seed so every run times the same data.
    # Drawn on the device: on a GPU, a GiB of normals takes seconds on the host.
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    return torch.randn(shape, generator=gen, device=DEVICE, dtype=dtype)


def _synchronize() -> None:
    if ON_GPU:
        torch.cuda.synchronize()


def _timed_call(
    norm: _Norm, direction: str, impl: str, shape: tuple[int, int], dtype: torch.dtype,
    kernel_benchmark: KernelBenchmark,
) -> Callable[[], object]:
    """The no-argument call to time; a compile, and the backward's forward, happen here."""
    inputs = (_random(shape, dtype, seed=0),) + tuple(
        _random(shape[-1:], dtype, seed=1 + i) for i in range(norm.n_params)
    )
    if impl == "triton":
        op = norm.triton
    elif impl == "torch":
        op = norm.torch
    else:
        # A fresh dynamo cache per case: no recompile limit reached across shapes (which would
        # silently fall back to eager) and no automatic dynamic shapes, so each shape gets the
        # specialised code a deployment would get.
        torch._dynamo.reset()
        op = torch.compile(norm.torch, dynamic=False, fullgraph=True)

    if direction == "backward":
        grad_out = _random(shape, dtype, seed=99)
        for t in inputs:
            t.requires_grad_()

    start = time.perf_counter()
    if direction == "forward":

        def call() -> object:
            return op(*inputs)

    else:
        # Under torch.compile this forward compiles the joint graph.
        y = op(*inputs)

        def call() -> object:
            return torch.autograd.grad(y, inputs, grad_out, retain_graph=True)

    if impl == "torch.compile":
        # The first call compiles what is left: the forward, or the backward half.
        call()
        _synchronize()
        kernel_benchmark.benchmark.extra_info["compile_s"] = time.perf_counter() - start
    return call


def _measure(
    norm: _Norm, kernel_benchmark: KernelBenchmark, direction: str, impl: str,
    shape: tuple[int, int], dtype: torch.dtype,
) -> None:
    rows, cols = shape
    if direction == "forward":
        flops, bytes = norm.flops(rows, cols), norm.bytes(rows, cols, dtype)
    else:
        flops, bytes = norm.backward_flops(rows, cols), norm.backward_bytes(rows, cols, dtype)
    result = kernel_benchmark(
        _timed_call(norm, direction, impl, shape, dtype, kernel_benchmark),
        flops=flops,
        bytes=bytes,
        dtype=dtype_name(dtype),
        shape=_shape_id(shape),
        impl=impl,
        group=f"{norm.name}-{direction}-{_shape_id(shape)}-{dtype_name(dtype)}",
    )
    # A benchmark of a wrong kernel is meaningless; this cheap check keeps a broken build
    # from posting timings (the correctness suite does the thorough comparison).
    outputs = result if isinstance(result, tuple) else (result,)
    assert all(isinstance(t, torch.Tensor) and torch.isfinite(t).all() for t in outputs)


@pytest.mark.parametrize(("direction", "impl", "shape", "dtype"), _cases("rmsnorm"))
def test_rmsnorm(
    kernel_benchmark: KernelBenchmark, direction: str, impl: str, shape: tuple[int, int], dtype: torch.dtype
) -> None:
    _measure(RMSNORM, kernel_benchmark, direction, impl, shape, dtype)


@pytest.mark.parametrize(("direction", "impl", "shape", "dtype"), _cases("layernorm"))
def test_layernorm(
    kernel_benchmark: KernelBenchmark, direction: str, impl: str, shape: tuple[int, int], dtype: torch.dtype
) -> None:
    _measure(LAYERNORM, kernel_benchmark, direction, impl, shape, dtype)
