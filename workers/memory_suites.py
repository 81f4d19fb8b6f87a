"""Each benchmark suite's peak-memory measurements, as a derived suite of their own.

A benchmark that reports ``peak_memory_bytes`` in ``extra_info`` (``roofwatch.memory``; a plain
pytest-benchmark test may set it itself) becomes a second measurement: same name, suite
``<suite>:memory`` (``roofwatch.common.metrics``), unit bytes, one value per process. A/B pairing
compares two such values only when the same allocator counted them (``peak_memory_source``, kept
as the record's timing option), so a commit that moves a suite from one device to another makes
its memory series incomparable rather than changed.
"""

from __future__ import annotations

import math

from roofwatch.common.envelope import MeasurementRecord, SuiteResult
from roofwatch.common.metrics import BYTES, memory_suite

PEAK_KEY = "peak_memory_bytes"
SOURCE_KEY = "peak_memory_source"
REPORTED = "reported"  # the benchmark gave a peak without saying who counted it
MAX_BYTES = 2**62
# Below this, a peak tracemalloc counted is the interpreter's own bookkeeping (frames, the call's
# Python objects: a few hundred bytes that move by tens between processes), not a kernel's buffer:
# a torch kernel writing into a preallocated output reads ~500 B. Tracked, it would be a series
# of noise at a 5 % min_effect. A CUDA peak counts allocator blocks only, and stays tracked.
TRACED_FLOOR = 64 * 1024


def peak_bytes(extra_info: dict[str, object]) -> float | None:
    """The reported peak: a positive, finite number of bytes; None for none, zero, or nonsense."""
    value = extra_info.get(PEAK_KEY)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    # A call that allocated nothing has no ratio to track (0 → anything is no percentage).
    return float(value) if math.isfinite(value) and 0 < value <= MAX_BYTES else None


def memory_record(measured: MeasurementRecord) -> MeasurementRecord | None:
    """The peak-memory measurement derived from ``measured``, or None when it reports no peak."""
    peak = peak_bytes(measured.extra_info)
    if peak is None:
        return None
    source = str(measured.extra_info.get(SOURCE_KEY) or REPORTED)
    if source == "tracemalloc" and peak < TRACED_FLOOR:
        return None
    impl = measured.extra_info.get("impl")
    return MeasurementRecord(
        name=measured.name, params=measured.params, group=measured.group, samples=[peak], median=peak, iqr=0.0,
        min=peak, mean=peak, n=1, dtype=measured.dtype, shape=measured.shape, unit=BYTES,
        extra_info={SOURCE_KEY: source, **({"impl": impl} if isinstance(impl, str) else {})},
        timing={"memory_source": source}, ran=measured.ran,
    )


def with_memory_suites(results: list[SuiteResult]) -> list[SuiteResult]:
    """``results`` followed by a derived memory suite for each benchmark suite that reported a peak.

    The derived suite carries its parent's status and reason (it is the same process), so a
    benchmark missing from it on one side is explained as its parent's benchmarks are.
    """
    derived: list[SuiteResult] = []
    for result in results:
        if result.kind != "benchmark":
            continue
        records = [r for m in result.measurements if (r := memory_record(m)) is not None]
        if records:
            derived.append(SuiteResult(name=memory_suite(result.name), kind="benchmark", status=result.status,
                                       reason=result.reason, exit_code=result.exit_code, measurements=records,
                                       selected=result.selected, order_seed=result.order_seed,
                                       order=result.order))
    return [*results, *derived]
