"""Benchmarks roofwatch derives from a measured one: its peak memory, a series of its own.

A benchmark that reports ``peak_memory_bytes`` in ``extra_info`` (``kernel_benchmark`` does; a
plain pytest-benchmark test may) is also recorded as a benchmark of the same name in the derived
suite ``<suite>:memory``, unit bytes, lower is better, one value per process. Series, change
points, A/B pairing, verdicts, comments and the dashboard then treat it as any other benchmark;
only what runs it differs: the process of the suite it was derived from.
"""

from __future__ import annotations

MEMORY_SUITE_SUFFIX = ":memory"
SECONDS = "s"
BYTES = "B"


def memory_suite(suite: str) -> str:
    """The derived suite that holds ``suite``'s peak-memory benchmarks."""
    return f"{suite}{MEMORY_SUITE_SUFFIX}"


def is_memory_suite(suite: str) -> bool:
    return suite.endswith(MEMORY_SUITE_SUFFIX)


def measuring_suite(suite: str) -> str:
    """The suite whose process measures ``suite``'s benchmarks: itself, or the one a memory suite derives from."""
    return suite[: -len(MEMORY_SUITE_SUFFIX)] if is_memory_suite(suite) else suite
