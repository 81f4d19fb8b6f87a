"""Benchmarks of the Triton softmax, with torch's softmax on the same inputs as the baseline.

Every benchmark reports its work per call in ``extra_info`` (``flops``, ``bytes``) so roofwatch
can place it on the roofline, plus ``dtype``, ``shape`` and ``impl`` to label the series.
``kernel_benchmark`` (``roofwatch.harness``) does the timing: CUDA events with an L2 flush on a
GPU, the host clock on CPU, samples until the median is known to ±0.5 % or a cap is hit.
On a GPU the shapes are LLM-sized (hidden sizes, attention rows, vocabularies); on CPU the
Triton interpreter runs each program in Python, so the shapes shrink to keep the suite short.
"""

from collections.abc import Callable

import pytest
import torch

from kernels.softmax import softmax, softmax_bytes, softmax_flops
from roofwatch.harness import KernelBenchmark
from roofwatch.tolerances import dtype_name

ON_GPU = torch.cuda.is_available()
DEVICE = "cuda" if ON_GPU else "cpu"

if ON_GPU:
    SHAPES = [(4096, 4096), (4096, 8192), (2048, 32_000), (1024, 128_256)]
else:
    # (4, 10_000) is past the single-block cap, so the streamed kernel is timed too.
    SHAPES = [(32, 256), (64, 1000), (4, 10_000)]
DTYPES = [torch.float32, torch.bfloat16]
IMPLS = ["triton", "torch"]


def _shape_id(shape: tuple[int, int]) -> str:
    return f"{shape[0]}x{shape[1]}"


CASES = [
    pytest.param(impl, shape, dtype, id=f"{impl}-{_shape_id(shape)}-{dtype_name(dtype)}")
    for shape in SHAPES
    for dtype in DTYPES
    for impl in IMPLS
]


def _call(impl: str, x: torch.Tensor, out: torch.Tensor) -> Callable[[], torch.Tensor]:
    if impl == "triton":
        return lambda: softmax(x, out=out)
    return lambda: torch.softmax(x, dim=-1)


@pytest.mark.parametrize(("impl", "shape", "dtype"), CASES)
def test_softmax(
    kernel_benchmark: KernelBenchmark, impl: str, shape: tuple[int, int], dtype: torch.dtype
) -> None:
    rows, cols = shape
    # Random inputs (never zeros, which some hardware moves or multiplies faster), allocated
    # once outside the timed region, from a fixed seed so every run times the same data.
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=gen).to(dtype=dtype, device=DEVICE)
    out = torch.empty_like(x)

    result = kernel_benchmark(
        _call(impl, x, out),
        flops=softmax_flops(rows, cols),
        bytes=softmax_bytes(rows, cols, dtype),
        dtype=dtype_name(dtype),
        shape=_shape_id(shape),
        impl=impl,
        group=f"softmax-{_shape_id(shape)}-{dtype_name(dtype)}",
    )
    # A benchmark of a wrong kernel is meaningless; this cheap check keeps a broken build
    # from posting timings (the correctness suite does the thorough comparison).
    assert isinstance(result, torch.Tensor) and torch.isfinite(result).all()
