"""Parse what suites write: pytest JUnit XML and pytest-benchmark JSON.

Both parsers raise ``ResultFileError`` with a readable reason for a missing, truncated,
foreign or hostile file (a link, deeply nested, huge numbers, wrong types, timings that are
not positive finite seconds, a string longer than a limit, more benchmarks than one suite may
report, a file that takes longer to read than its suite had left), so the runner records that
suite as errored and moves on.

pytest-benchmark's JSON holds every round of every benchmark (200,000 rounds of 64 benchmarks
is a 300 MB file; ``json.load`` of it took 800 MB and 15 s here). It is read one benchmark at a
time (ijson, through ``bounded_json.BoundedStream``, which keeps the read linear in the file's
size), and each benchmark becomes its measurement at once, keeping its summary statistics (over
all rounds) and a bounded, seeded reservoir of its raw samples (``sampling.SAMPLE_LIMIT``): a
worker's memory grows neither with the round count nor past ``ROOFWATCH_MAX_BENCHMARKS``
measurements.
"""

from __future__ import annotations

import json
import math
import os
import stat
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ijson
import numpy as np

from roofwatch.common.envelope import MeasurementRecord, OutcomeRecord
from roofwatch.common.errors import ResultFileError
from roofwatch.common.limits import BENCHMARK_FILE_LIMIT, RESULT_FILE_LIMIT, size_text
from roofwatch.common.sampling import reservoir, seed_for
from roofwatch.common.settings import get_worker_settings
from roofwatch.common.tree_files import UnsafePath, open_in, read_file
from roofwatch.result_files.bounded_json import CHUNK, BoundedStream, StrictReader

MESSAGE_LIMIT = 4000
MAX_ROUNDS = 2**62


def read_result(path: Path, what: str) -> bytes:
    """The result file a suite wrote into its scratch folder, never through a link it planted there."""
    try:
        data = read_file(path, RESULT_FILE_LIMIT)
    except UnsafePath as exc:
        raise ResultFileError(f"{what}: {exc}") from exc
    if not data:
        raise ResultFileError(f"no {what} written at {path.name}")
    return data


def load_json(data: bytes, what: str) -> Any:
    """JSON of an untrusted file: nesting, giant integers and bad text are a ``ResultFileError``."""
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError as exc:
        raise ResultFileError(f"{what} is nested too deeply to read") from exc
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, and integers over 4300 digits
        raise ResultFileError(f"{what} is not JSON: {exc}") from exc


def parse_junit(path: Path) -> list[OutcomeRecord]:
    """Test outcomes from pytest's ``--junitxml`` file.

    ``test_id`` is ``<classname>::<name>``, e.g. ``suites.correctness.test_softmax::test_softmax[fp32]``.
    ``max_abs_err`` / ``max_rel_err`` / ``beyond_half_ulp`` come from ``record_property`` entries
    of those names. A test that fails and then errors in teardown is written twice by pytest (to
    follow the JUnit schema); it is one outcome here, the worse of the two, with both messages.
    """
    data = read_result(path, "JUnit XML")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise ResultFileError(f"JUnit XML is not well-formed: {exc}") from exc
    except RecursionError as exc:
        raise ResultFileError("JUnit XML is nested too deeply to read") from exc
    if root.tag not in ("testsuites", "testsuite"):
        raise ResultFileError(f"not a JUnit XML report (root element <{root.tag}>)")
    merged: dict[str, OutcomeRecord] = {}
    for case in root.iter("testcase"):
        outcome = _outcome(case)
        first = merged.get(outcome.test_id)
        merged[outcome.test_id] = outcome if first is None else _worse(first, outcome)
    return list(merged.values())


SEVERITY = {"skipped": 0, "passed": 1, "error": 2, "failed": 3}


def _worse(first: OutcomeRecord, second: OutcomeRecord) -> OutcomeRecord:
    """One outcome for a test reported twice (its call, then its teardown)."""
    worst = max(first, second, key=lambda o: SEVERITY[o.outcome])
    message = "\n\n".join(filter(None, [first.message, second.message]))[:MESSAGE_LIMIT]
    return worst.model_copy(update={"message": message, "duration_s": first.duration_s + second.duration_s})


def _outcome(case: ET.Element) -> OutcomeRecord:
    classname, name = case.get("classname", ""), case.get("name", "")
    outcome, message = "passed", ""
    for tag, label in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        node = case.find(tag)
        if node is not None:
            outcome = label
            message = "\n".join(filter(None, [node.get("message", ""), (node.text or "").strip()]))
            break
    properties = {
        prop.get("name", ""): prop.get("value", "") for prop in case.iter("property")
    }
    return OutcomeRecord(
        test_id=f"{classname}::{name}" if classname else name,
        outcome=outcome,  # type: ignore[arg-type]
        message=message[:MESSAGE_LIMIT],
        duration_s=_number(case.get("time")) or 0.0,
        max_abs_err=_number(properties.get("max_abs_err")),
        max_rel_err=_number(properties.get("max_rel_err")),
        beyond_half_ulp=_number(properties.get("beyond_half_ulp")),
    )


def parse_benchmark_json(path: Path, *, deadline: float | None = None, budget_s: float | None = None,
                         max_benchmarks: int | None = None) -> list[MeasurementRecord]:
    """Measurements from pytest-benchmark's ``--benchmark-json`` file (times in seconds).

    ``deadline`` (a ``time.monotonic()`` value) bounds the time spent reading, ``budget_s`` says
    how much that was; ``max_benchmarks`` (default: this host's ``ROOFWATCH_MAX_BENCHMARKS``)
    bounds the benchmarks read, so memory never grows past that many measurements.
    """
    limit = get_worker_settings().max_benchmarks if max_benchmarks is None else max_benchmarks
    try:
        descriptor = open_in(path.parent, path.name)
    except UnsafePath as exc:
        raise ResultFileError(f"benchmark JSON: {exc}") from exc
    if descriptor is None:
        raise ResultFileError(f"no benchmark JSON written at {path.name}")
    with os.fdopen(descriptor, "rb") as stream:
        info = os.fstat(stream.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ResultFileError(f"benchmark JSON: {path.name!r} is not a regular file; it is not read")
        if info.st_size == 0:
            raise ResultFileError(f"no benchmark JSON written at {path.name}")
        if info.st_size > BENCHMARK_FILE_LIMIT:
            raise ResultFileError(f"benchmark JSON is {info.st_size} bytes, over the "
                                  f"{size_text(BENCHMARK_FILE_LIMIT)} limit ({BENCHMARK_FILE_LIMIT} bytes)")
        try:
            return _measurements(BoundedStream(stream, "benchmark JSON", deadline, budget_s), limit)
        except _NotStrictJSON:
            # Python's json module writes NaN and Infinity, which a pytest-benchmark file may hold.
            # Such a file is read whole and made strict as the same parser reads it, within the same limits.
            stream.seek(0)
            data = stream.read(min(info.st_size, RESULT_FILE_LIMIT) + 1)
    if len(data) > RESULT_FILE_LIMIT:
        raise ResultFileError(f"benchmark JSON that is not strict JSON is read whole, up to "
                              f"{size_text(RESULT_FILE_LIMIT)} ({RESULT_FILE_LIMIT} bytes); this one is larger")
    try:
        return _measurements(BoundedStream(StrictReader(data), "benchmark JSON", deadline, budget_s), limit)
    except _NotStrictJSON as exc:
        raise ResultFileError(f"benchmark JSON is not JSON: {exc.__cause__}") from exc


NO_BENCHMARKS = "benchmark JSON has no 'benchmarks' list (not pytest-benchmark output?)"


class _NotStrictJSON(Exception):
    """ijson refused the file: not strict JSON (perhaps Python's NaN), or not JSON at all."""


def _measurements(stream: BoundedStream, limit: int) -> list[MeasurementRecord]:
    """The ``benchmarks`` entries, each cut to its reservoir and made a measurement as soon as it is read."""
    measurements: list[MeasurementRecord] = []
    for entry in _strict_items(stream, "benchmarks.item"):
        if len(measurements) == limit:
            raise ResultFileError(
                f"benchmark JSON holds more than {limit:,} benchmarks, the most one suite may report: split the "
                f"suite, or raise ROOFWATCH_MAX_BENCHMARKS where the file is read (the worker; the server for "
                f"uploads)")
        measurements.append(_measurement(_bounded(entry)))
    if not measurements:
        stream.restart()
        if not _has_benchmarks_list(stream):
            raise ResultFileError(NO_BENCHMARKS)
    return measurements


def _strict_items(stream: BoundedStream, prefix: str) -> Iterator[Any]:
    items = ijson.items(stream, prefix, use_float=True, buf_size=CHUNK)
    while True:
        try:
            item = next(items)
        except StopIteration:
            return
        except (ijson.JSONError, ValueError, OverflowError, RecursionError) as exc:
            raise _NotStrictJSON(str(exc)) from exc
        yield item


def _has_benchmarks_list(stream: BoundedStream) -> bool:
    """Whether the top-level object has a ``benchmarks`` list (read as events: nothing is built)."""
    try:
        return any(prefix == "benchmarks" and event == "start_array"
                   for prefix, event, _ in ijson.parse(stream, use_float=True, buf_size=CHUNK))
    except (ijson.JSONError, ValueError, OverflowError, RecursionError) as exc:
        raise _NotStrictJSON(str(exc)) from exc


def _bounded(entry: Any) -> Any:
    """``entry`` with its raw samples replaced by their reservoir (and their count kept)."""
    stats = entry.get("stats") if isinstance(entry, dict) else None
    if not isinstance(stats, dict) or not isinstance(stats.get("data"), list):
        return entry
    data = _finite_samples(stats["data"])
    rounds = stats.get("rounds") or len(data) or 1
    sample = reservoir(data, seed=seed_for(str(entry.get("name"))))
    return {**entry, "stats": {**stats, "data": sample, "rounds": rounds}}


def _finite_samples(data: list[Any]) -> np.ndarray:
    """The finite, positive numbers of a ``data`` list (a C-speed conversion when all are numbers)."""
    try:
        values = np.asarray(data, dtype=float)
    except (TypeError, ValueError, OverflowError):
        values = np.asarray([x for x in data if _finite(x)], dtype=float)
    if values.ndim != 1:
        return np.empty(0)
    return values[np.isfinite(values) & (values > 0)]


def _measurement(entry: Any) -> MeasurementRecord:
    if not isinstance(entry, dict) or not isinstance(entry.get("stats"), dict) or "name" not in entry:
        raise ResultFileError("benchmark entry lacks name/stats")
    stats, name = entry["stats"], entry["name"]
    if not isinstance(name, str):
        raise ResultFileError(f"benchmark name must be a string, got {type(name).__name__}")
    median = _seconds(stats.get("median"), name, "median")
    mean = _seconds(stats.get("mean"), name, "mean")
    extra = entry.get("extra_info") or {}
    if not isinstance(extra, dict):
        raise ResultFileError(f"{name}: extra_info must be an object, got {type(extra).__name__}")
    params = entry.get("param")
    raw_samples = stats.get("data") or []
    if not isinstance(raw_samples, list):
        raise ResultFileError(f"{name}: stats.data must be a list, got {type(raw_samples).__name__}")
    samples = [float(x) for x in raw_samples if _finite(x) and x > 0]
    return MeasurementRecord(
        name=name,
        params="" if params is None else str(params),
        group=str(entry.get("group") or ""),
        samples=samples,
        median=median,
        iqr=_spread(stats.get("iqr"), name, "iqr"),
        min=_seconds(stats.get("min", median), name, "min"),
        mean=mean,
        n=_rounds(stats.get("rounds"), len(samples), name),
        stddev=_spread(stats.get("stddev"), name, "stddev"),
        flops=_number(extra.get("flops")),
        bytes=_number(extra.get("bytes")),
        dtype=str(extra.get("dtype") or ""),
        shape=str(extra.get("shape") or ""),
        extra_info={k: v for k, v in extra.items() if isinstance(v, (str, bool)) or _finite(v)},
        timing=_timing(entry.get("options")),
    )


TIMING_KEYS = 16  # pytest-benchmark writes 8 options; a file cannot make the envelope grow with more
TIMING_TEXT = 200


def _timing(options: object) -> dict[str, str | float | bool]:
    """pytest-benchmark's ``options`` of one benchmark (timer, rounds, warm-up, ...), scalars only, bounded."""
    if not isinstance(options, dict):
        return {}
    kept: dict[str, str | float | bool] = {}
    for key, value in list(options.items())[:TIMING_KEYS]:
        if isinstance(value, bool) or (isinstance(value, (int, float)) and _finite(value)):
            kept[str(key)[:TIMING_TEXT]] = value
        elif isinstance(value, str):
            kept[str(key)[:TIMING_TEXT]] = value[:TIMING_TEXT]
        elif value is None:
            kept[str(key)[:TIMING_TEXT]] = "none"
    return kept


def _seconds(value: object, name: str, field: str) -> float:
    """A timing: a finite number of seconds above zero; anything else is no measurement."""
    if isinstance(value, bool) or not _finite(value) or value <= 0:  # type: ignore[operator]
        raise ResultFileError(f"{name}: {field} must be a positive, finite number of seconds, got {value!r:.40}")
    return float(value)  # type: ignore[arg-type]


def _spread(value: object, name: str, field: str) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not _finite(value) or value < 0:  # type: ignore[operator]
        raise ResultFileError(f"{name}: {field} must be a finite number of seconds, at least 0, got {value!r:.40}")
    return float(value)  # type: ignore[arg-type]


def _rounds(value: object, samples: int, name: str) -> int:
    if value is None or value == 0:
        return samples or 1
    if isinstance(value, bool) or not _finite(value) or not 1 <= value <= MAX_ROUNDS:  # type: ignore[operator]
        raise ResultFileError(f"{name}: rounds must be a whole number from 1 to {MAX_ROUNDS}, got {value!r:.40}")
    return int(value)  # type: ignore[call-overload]


def _finite(value: object) -> bool:
    # int first: math.isfinite of a huge int raises OverflowError, and such a count is no timing.
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) < 2**63
    return isinstance(value, float) and math.isfinite(value)


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None
