"""The ``roofwatch`` pytest plugin: ``kernel_benchmark`` in every suite of an environment with roofwatch.

Registered through the ``pytest11`` entry point, so a repository needs no conftest to use it::

    def test_saxpy(kernel_benchmark):
        kernel_benchmark(lambda: saxpy(a, x, y), flops=2 * n, bytes=12 * n, dtype="fp32",
                         shape=str(n), impl="triton")

A suite that wants other timer settings overrides ``kernel_timer`` in its own conftest (a
conftest fixture wins over a plugin's). ``-p no:roofwatch`` turns the plugin off.

``--roofwatch-triton-compat`` (or ``ROOFWATCH_TRITON_COMPAT=1``) installs
``roofwatch.triton_interpreter`` for the session when Triton's interpreter is on
(``TRITON_INTERPRET=1``): libdevice math and float scalar arguments work there as compiled, and
bf16 arithmetic, which cannot be fixed there, warns once. Without the interpreter it does nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from roofwatch.harness import KernelBenchmark
from roofwatch.timing import Timer, default_timer

__all__ = ["kernel_benchmark", "kernel_timer"]

COMPAT_OPTION = "--roofwatch-triton-compat"
COMPAT_ENV = "ROOFWATCH_TRITON_COMPAT"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("roofwatch").addoption(
        COMPAT_OPTION, action="store_true", default=False,
        help="under TRITON_INTERPRET=1, patch the Triton interpreter's gaps (libdevice math, float scalar "
             f"arguments) and warn on bf16 arithmetic it computes wrongly; also {COMPAT_ENV}=1")


def _compat_requested(config: pytest.Config) -> bool:
    return bool(config.getoption("roofwatch_triton_compat")) or os.environ.get(COMPAT_ENV) == "1"


def pytest_configure(config: pytest.Config) -> None:
    if _compat_requested(config):
        # Imported only when asked for: loading the plugin stays free of numpy, torch and triton.
        from roofwatch import triton_interpreter

        triton_interpreter.install()


def pytest_collection_finish(session: pytest.Session) -> None:
    # A conftest below the rootdir, imported during collection, may be what turns the interpreter on.
    if _compat_requested(session.config):
        from roofwatch import triton_interpreter

        triton_interpreter.install()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _compat_requested(config):
        from roofwatch import triton_interpreter

        triton_interpreter.uninstall()


def pytest_report_header(config: pytest.Config) -> str | None:
    if not _compat_requested(config):
        return None
    from roofwatch import triton_interpreter

    applied = triton_interpreter.installed()
    if not applied:
        return "roofwatch triton compat: inactive (TRITON_INTERPRET is not on, or this Triton has none of its gaps)"
    fixed = [name for name in applied if name in triton_interpreter.FIXED]
    warned = [name for name in applied if name in triton_interpreter.REPORTED]
    return (f"roofwatch triton compat: patched {', '.join(fixed) or 'nothing'}; "
            f"warns on {', '.join(warned) or 'nothing'}")


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
