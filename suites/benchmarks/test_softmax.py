"""Benchmarks of the Triton softmax, with torch's softmax on the same inputs as the baseline.

Every benchmark reports its work per call in ``extra_info`` (``flops``, ``bytes``) so roofwatch
can place it on the roofline, plus ``dtype``, ``shape`` and ``impl`` to label the series.
On a GPU the shapes are LLM-sized (hidden sizes, attention rows, vocabularies); on CPU the
Triton interpreter runs each program in Python, so the shapes shrink to keep the suite short.
"""

from collections.abc import Callable

import pytest
import torch
from pytest_benchmark.fixture import BenchmarkFixture

from kernels.softmax import softmax, softmax_bytes, softmax_flops
from suites.tolerances import dtype_name

ON_GPU = torch.cuda.is_available()
DEVICE = "cuda" if ON_GPU else "cpu"

if ON_GPU:
    SHAPES = [(4096, 4096), (4096, 8192), (2048, 32_000), (1024, 128_256)]
    ROUNDS = {"triton": 100, "torch": 100}
    WARMUP_ROUNDS = 10
else:
    # (4, 10_000) is past the single-block cap, so the streamed kernel is timed too.
    SHAPES = [(32, 256), (64, 1000), (4, 10_000)]
    # An interpreted call takes ~0.1 s, a torch call ~20 us: torch gets the rounds its
    # noisier, shorter samples need, Triton the few the time budget allows.
    ROUNDS = {"triton": 10, "torch": 200}
    WARMUP_ROUNDS = 1
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


def _timed_call(impl: str, x: torch.Tensor, out: torch.Tensor) -> Callable[[], object]:
    def triton_call() -> torch.Tensor:
        return softmax(x, out=out)

    def torch_call() -> torch.Tensor:
        return torch.softmax(x, dim=-1)

    call = triton_call if impl == "triton" else torch_call
    if not ON_GPU:
        return call

    def synchronized() -> object:
        # Launches are asynchronous; without waiting, the host timer would measure only the
        # launch and not the kernel.
        result = call()
        torch.cuda.synchronize()
        return result

    return synchronized


@pytest.mark.parametrize(("impl", "shape", "dtype"), CASES)
def test_softmax(
    benchmark: BenchmarkFixture, impl: str, shape: tuple[int, int], dtype: torch.dtype
) -> None:
    rows, cols = shape
    # Random inputs (never zeros, which some hardware moves or multiplies faster), allocated
    # once outside the timed region, from a fixed seed so every run times the same data.
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=gen).to(dtype=dtype, device=DEVICE)
    out = torch.empty_like(x)

    benchmark.group = f"softmax-{_shape_id(shape)}-{dtype_name(dtype)}"
    benchmark.extra_info.update(
        flops=softmax_flops(rows, cols),
        bytes=softmax_bytes(rows, cols, dtype),
        dtype=dtype_name(dtype),
        shape=_shape_id(shape),
        impl=impl,
    )
    result = benchmark.pedantic(
        _timed_call(impl, x, out), rounds=ROUNDS[impl], warmup_rounds=WARMUP_ROUNDS, iterations=1
    )
    # A benchmark of a wrong kernel is meaningless; this cheap check keeps a broken build
    # from posting timings (the correctness suite does the thorough comparison).
    assert torch.isfinite(result).all()
