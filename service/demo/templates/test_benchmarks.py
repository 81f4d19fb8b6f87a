"""One benchmark per kernel and shape; ``extra_info`` declares the work per call for the roofline."""

import numpy as np
import pytest

from minikernels.layernorm import layernorm, layernorm_bytes
from minikernels.matmul import matmul, matmul_bytes
from minikernels.rmsnorm import rmsnorm, rmsnorm_bytes
from minikernels.softmax import softmax, softmax_bytes

ROWS = [(64, 1024), (16, 4096)]


def _x(shape: tuple[int, int]) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def _declare(benchmark, flops: int, bytes_moved: int, shape: str) -> None:
    benchmark.extra_info.update(flops=flops, bytes=bytes_moved, dtype="fp32", shape=shape)


@pytest.mark.parametrize("shape", ROWS, ids=lambda s: f"{s[0]}x{s[1]}")
def test_rmsnorm(benchmark, shape):
    x, w = _x(shape), np.ones(shape[1], dtype=np.float32)
    _declare(benchmark, 4 * x.size, rmsnorm_bytes(x), f"{shape[0]}x{shape[1]}")
    benchmark(rmsnorm, x, w)


@pytest.mark.parametrize("shape", ROWS, ids=lambda s: f"{s[0]}x{s[1]}")
def test_softmax(benchmark, shape):
    x = _x(shape)
    _declare(benchmark, 5 * x.size, softmax_bytes(x), f"{shape[0]}x{shape[1]}")
    benchmark(softmax, x)


@pytest.mark.parametrize("shape", ROWS, ids=lambda s: f"{s[0]}x{s[1]}")
def test_layernorm(benchmark, shape):
    x = _x(shape)
    w, b = np.ones(shape[1], dtype=np.float32), np.zeros(shape[1], dtype=np.float32)
    _declare(benchmark, 8 * x.size, layernorm_bytes(x), f"{shape[0]}x{shape[1]}")
    benchmark(layernorm, x, w, b)


def test_matmul(benchmark):
    m, n, k = 64, 128, 128
    a, b = _x((m, k)), _x((k, n))
    _declare(benchmark, 2 * m * n * k, matmul_bytes(a, b), f"{m}x{n}x{k}")
    benchmark(matmul, a, b)
