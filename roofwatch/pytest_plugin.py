"""The ``roofwatch`` pytest plugin: ``kernel_benchmark`` in every suite of an environment with roofwatch.

Registered through the ``pytest11`` entry point, so a repository needs no conftest to use it::

    def test_saxpy(kernel_benchmark):
        kernel_benchmark(lambda: saxpy(a, x, y), flops=2 * n, bytes=12 * n, dtype="fp32",
                         shape=str(n), impl="triton")

A suite that wants other timer settings overrides ``kernel_timer`` in its own conftest (a
conftest fixture wins over a plugin's). ``-p no:roofwatch`` turns the plugin off.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from roofwatch.harness import KernelBenchmark
from roofwatch.timing import Timer, default_timer

__all__ = ["kernel_benchmark", "kernel_timer"]


@pytest.fixture(scope="session")
def kernel_timer() -> Iterator[Timer]:
    """One timer per session (``GpuTimer`` on a CUDA device, else ``HostTimer``): its L2 flush
    buffer and NVML handle are made once."""
    timer = default_timer()
    yield timer
    timer.close()


@pytest.fixture
def kernel_benchmark(benchmark: BenchmarkFixture, kernel_timer: Timer) -> KernelBenchmark:
    """``kernel_benchmark(fn, *, flops, bytes, dtype, shape, impl, group=None)``: see ``roofwatch.harness``."""
    return KernelBenchmark(benchmark, kernel_timer)
