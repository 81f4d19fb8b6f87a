"""Benchmark result files a team's own CI already writes, read into measurement records.

Formats: pytest-benchmark ``--benchmark-json`` (roofwatch's own parser), asv result files (read
by asv's own ``Results`` loader, v1 files upgraded by asv's ``update_to_2``), Google Benchmark
``--benchmark_format=json`` and nvbench ``--json`` (neither project ships a reader on PyPI; both
schemas are small and checked field by field here). Every reader returns times in seconds per
call and raises ``UploadFormatError`` naming what is wrong, before anything is stored.
Only timings are read: asv ``mem_``/``peakmem_``/``track_`` benchmarks are counted and left out.
A file may report at most ``ROOFWATCH_MAX_BENCHMARKS`` benchmarks, as one suite may.
"""

from __future__ import annotations

import json
import math
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofwatch.common.envelope import MeasurementRecord
from roofwatch.common.errors import ResultFileError, UploadFormatError
from roofwatch.common.settings import get_worker_settings
from roofwatch.result_files.suite_results import parse_benchmark_json

FORMATS = ("pytest-benchmark", "google-benchmark", "nvbench", "asv")
GOOGLE_TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


@dataclass
class ParsedResults:
    """What one file holds: its format, the timings, and the device it names (when it names one)."""

    format: str
    measurements: list[MeasurementRecord]
    devices: list[str] = field(default_factory=list)  # device names the file itself records
    skipped: list[str] = field(default_factory=list)  # entries left out, each with why


def read_results(path: Path, fmt: str = "auto", device_class: str | None = None) -> ParsedResults:
    """The measurements in ``path``; ``fmt`` one of ``FORMATS`` or ``auto`` (told from the content)."""
    data = _load_json(path)
    if fmt == "auto":
        fmt = detect_format(data)
    if fmt not in READERS:
        raise UploadFormatError(f"unknown format {fmt!r}; roofwatch reads {', '.join(FORMATS)} (or auto)")
    try:
        parsed = READERS[fmt](path, data, device_class)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError, RecursionError) as exc:
        # A well-formed file whose fields have the wrong types (a list where a unit belongs,
        # "inf" as a count, a scalar where a list belongs): the file's fault, said as such.
        raise UploadFormatError(f"{path.name}: not a {fmt} file roofwatch can read: a field has the wrong type or "
                                f"value ({type(exc).__name__}: {str(exc)[:200]})") from exc
    limit = get_worker_settings().max_benchmarks
    if len(parsed.measurements) > limit:
        raise UploadFormatError(f"{path.name}: {len(parsed.measurements):,} benchmarks, more than the {limit:,} one "
                                "file may report: split the file, or raise ROOFWATCH_MAX_BENCHMARKS on the server")
    bad = [m.name for m in parsed.measurements
           if not all(_finite(v) and v > 0 for v in (m.median, m.min, m.mean))]
    if bad:
        raise UploadFormatError(f"{path.name}: {len(bad)} benchmark(s) without a positive, finite time, "
                                f"e.g. {bad[0]!r:.200}; nothing was stored")
    if not parsed.measurements:
        why = f" ({'; '.join(parsed.skipped[:5])})" if parsed.skipped else ""
        raise UploadFormatError(f"{path.name}: no timing results in this {fmt} file{why}")
    names = [(m.name, m.params) for m in parsed.measurements]
    if len(set(names)) != len(names):
        raise UploadFormatError(f"{path.name}: the same benchmark appears twice; upload one run per file")
    return parsed


def _load_json(path: Path) -> Any:
    if not path.is_file():
        raise UploadFormatError(f"no such file: {path}")
    try:
        # Python's json accepts the bare NaN that old asv files contain.
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise UploadFormatError(f"{path.name} is not UTF-8 text: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise UploadFormatError(f"{path.name} is not valid JSON (truncated?): {exc}") from exc
    except RecursionError as exc:
        raise UploadFormatError(f"{path.name} is nested too deeply to read") from exc
    except ValueError as exc:  # an integer of more than 4300 digits
        raise UploadFormatError(f"{path.name} is not JSON roofwatch reads: {exc}") from exc


def detect_format(data: Any) -> str:
    if not isinstance(data, dict):
        raise UploadFormatError("a result file holds a JSON object; this one holds "
                                f"{type(data).__name__}")
    if "result_columns" in data or ({"commit_hash", "results", "params"} <= data.keys()):
        return "asv"
    if isinstance(data.get("benchmarks"), list):
        if isinstance(data.get("meta"), dict) and "devices" in data:
            return "nvbench"
        if isinstance(data.get("context"), dict):
            return "google-benchmark"
        if "machine_info" in data or any(isinstance(b, dict) and "stats" in b for b in data["benchmarks"]):
            return "pytest-benchmark"
    raise UploadFormatError("cannot tell the format of this file (not pytest-benchmark, Google Benchmark, "
                            "nvbench or asv output); name it with --format")


# -- pytest-benchmark -------------------------------------------------------------------------


def _pytest_benchmark(path: Path, data: Any, device_class: str | None) -> ParsedResults:
    try:
        measurements = parse_benchmark_json(path, max_benchmarks=get_worker_settings().max_benchmarks)
    except ResultFileError as exc:
        raise UploadFormatError(f"{path.name}: {exc}") from exc
    return ParsedResults("pytest-benchmark", measurements)


# -- Google Benchmark -------------------------------------------------------------------------


def _google_benchmark(path: Path, data: Any, device_class: str | None) -> ParsedResults:
    """Repetitions of one benchmark become its samples; aggregate rows only when there are no repetitions."""
    entries = _list_of_objects(data, "benchmarks", path)
    iterations: dict[str, list[tuple[float, float | None]]] = {}
    aggregates: dict[str, dict[str, tuple[float, float | None]]] = {}
    skipped: list[str] = []
    for entry in entries:
        name = _text(entry, "name", path)
        if entry.get("error_occurred"):
            skipped.append(f"{name}: {entry.get('error_message', 'error')}")
            continue
        run_name = str(entry.get("run_name") or name)
        unit = entry.get("time_unit", "ns")
        if unit not in GOOGLE_TIME_UNITS:
            raise UploadFormatError(f"{path.name}: {name}: unknown time_unit {unit!r}")
        seconds = _positive(entry, "real_time", path) * GOOGLE_TIME_UNITS[unit]
        per_second = entry.get("bytes_per_second")
        moved = float(per_second) * seconds if isinstance(per_second, (int, float)) and per_second > 0 else None
        if entry.get("run_type", "iteration") == "aggregate":
            aggregates.setdefault(run_name, {})[str(entry.get("aggregate_name", ""))] = (seconds, moved)
        else:
            iterations.setdefault(run_name, []).append((seconds, moved))
    records = [_record(name, [s for s, _ in runs], runs[0][1]) for name, runs in iterations.items()]
    for name, by_kind in aggregates.items():
        if name not in iterations and ("median" in by_kind or "mean" in by_kind):
            seconds, moved = by_kind.get("median") or by_kind["mean"]
            records.append(_record(name, [seconds], moved))
    return ParsedResults("google-benchmark", records, skipped=skipped)


# -- nvbench ----------------------------------------------------------------------------------


def _nvbench(path: Path, data: Any, device_class: str | None) -> ParsedResults:
    """One record per benchmark state (axis values); GPU time of nvbench's cold measurement.

    nvbench keeps summaries, not samples: the mean is stored as the median too, with the
    relative standard deviation and the sample count it reports.
    """
    devices = {d.get("id"): str(d.get("name", "")) for d in _list_of_objects(data, "devices", path)}
    wanted = _devices_for(devices, device_class, path)
    records: list[MeasurementRecord] = []
    skipped: list[str] = []
    for bench in _list_of_objects(data, "benchmarks", path):
        name = _text(bench, "name", path)
        states = bench.get("states")
        if not isinstance(states, list):
            raise UploadFormatError(f"{path.name}: benchmark {name!r} has no 'states' list")
        for state in states:
            if not isinstance(state, dict) or state.get("device") not in wanted:
                continue
            label = f"{name}[{_axis_label(state)}]" if state.get("axis_values") else name
            if state.get("is_skipped"):
                skipped.append(f"{label}: {state.get('skip_reason', 'skipped')}")
                continue
            summaries = _summaries(state, path, label)
            mean = summaries.get("nv/cold/time/gpu/mean")
            if mean is None or not mean > 0:
                skipped.append(f"{label}: no nv/cold/time/gpu/mean")
                continue
            relative = summaries.get("nv/cold/time/gpu/stdev/relative") or 0.0
            bandwidth = summaries.get("nv/cold/bw/global/bytes_per_second")
            records.append(MeasurementRecord(
                name=name, params=_axis_label(state), median=mean, mean=mean, min=mean, iqr=0.0,
                n=int(summaries.get("nv/cold/sample_size") or 1), stddev=relative * mean,
                bytes=bandwidth * mean if bandwidth else None,
            ))
    return ParsedResults("nvbench", records, devices=[devices[d] for d in sorted(wanted)], skipped=skipped)


def _devices_for(devices: dict[Any, str], device_class: str | None, path: Path) -> set[Any]:
    if device_class is None:
        if len(devices) > 1:
            raise UploadFormatError(f"{path.name} holds results of {len(devices)} devices "
                                    f"({', '.join(devices.values())}); choose one with --device-class")
        return set(devices)
    wanted = {id_ for id_, name in devices.items() if _same_device(name, device_class)}
    if not wanted:
        raise UploadFormatError(f"device mismatch: {path.name} was measured on {', '.join(devices.values())}, "
                                f"not {device_class!r}")
    return wanted


def _same_device(name: str, device_class: str) -> bool:
    def canonical(text: str) -> str:
        return "".join(ch for ch in text.lower() if ch.isalnum())
    return canonical(name) == canonical(device_class)


def _axis_label(state: dict[str, Any]) -> str:
    values = state.get("axis_values") or []
    return ",".join(f"{v.get('name')}={v.get('value')}" for v in values if isinstance(v, dict))


def _summaries(state: dict[str, Any], path: Path, label: str) -> dict[str, float]:
    """Tag → number. nvbench writes every value as a string beside its type."""
    out: dict[str, float] = {}
    for summary in state.get("summaries") or []:
        if not isinstance(summary, dict):
            raise UploadFormatError(f"{path.name}: {label}: a summary is not an object")
        value = next((d.get("value") for d in summary.get("data") or []
                      if isinstance(d, dict) and d.get("name") == "value"), None)
        if value is None:
            continue
        try:
            out[str(summary.get("tag"))] = float(value)
        except (TypeError, ValueError):
            continue  # string-valued summaries (hints, device names) are not numbers
    return out


# -- asv ----------------------------------------------------------------------------------------


def _asv(path: Path, data: Any, device_class: str | None) -> ParsedResults:
    """Time benchmarks of one asv result file, through asv's own loader.

    asv's ``Results.load`` refuses the old v1 layout; asv's ``update_to_2`` converts it first.
    The machine name is recorded as the file's device.
    """
    from asv import util as asv_util
    from asv.results import Results

    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise UploadFormatError(f"{path.name}: asv result files have a 'results' object")
    if data.get("version") == 1 or "result_columns" not in data:
        try:
            data = Results.update_to_2(data) | {"version": 2}
        except (asv_util.UserError, KeyError, TypeError, AttributeError) as exc:
            raise UploadFormatError(f"{path.name}: not a readable asv v1 result file: {exc}") from exc
    with tempfile.TemporaryDirectory(prefix="roofwatch-asv-") as scratch:
        copy = Path(scratch) / "machine" / "results.json"
        copy.parent.mkdir()
        copy.write_text(json.dumps(data), encoding="utf-8")
        try:
            results = Results.load(str(copy))
        except (asv_util.UserError, KeyError, TypeError, ValueError) as exc:
            raise UploadFormatError(f"{path.name}: asv cannot read it: {exc}") from exc
    records: list[MeasurementRecord] = []
    skipped: list[str] = []
    for key in sorted(results.get_all_result_keys()):
        short = key.rsplit(".", 1)[-1]
        if not short.startswith("time_"):
            skipped.append(f"{key}: not a timing ({short.split('_', 1)[0]})")
            continue
        params = results.get_result_params(key) or []
        values = results.get_result_value(key, params)
        samples = results.get_result_samples(key, params)
        combos = _param_combinations(params)
        values = values if isinstance(values, list) else [values]
        samples = samples if isinstance(samples, list) else [None] * len(values)
        for label, value, sample in zip(combos, values, samples + [None] * len(values), strict=False):
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                skipped.append(f"{key}[{label}]: failed or missing")
                continue
            finite = [float(s) for s in sample or [] if isinstance(s, (int, float)) and math.isfinite(s)]
            records.append(_record(key, finite or [float(value)], None, params=label, median=float(value)))
    machine = str((data.get("params") or {}).get("machine") or "")
    return ParsedResults("asv", records, devices=[machine] if machine else [], skipped=skipped)


def _param_combinations(params: list[list[str]]) -> list[str]:
    """asv's parameter grid, flattened in its own order (the first parameter varies slowest)."""
    combos = [""]
    for values in params:
        combos = [f"{c},{v}" if c else str(v) for c in combos for v in values]
    return combos


# -- shared -------------------------------------------------------------------------------------


def _record(name: str, samples: list[float], moved: float | None, *, params: str = "",
            median: float | None = None) -> MeasurementRecord:
    ordered = sorted(samples)
    quartiles = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else [ordered[0]] * 3
    return MeasurementRecord(
        name=name, params=params, samples=samples, median=median if median is not None else statistics.median(ordered),
        iqr=quartiles[2] - quartiles[0], min=ordered[0], mean=statistics.fmean(ordered), n=len(ordered),
        stddev=statistics.pstdev(ordered) if len(ordered) > 1 else 0.0, bytes=moved,
    )


def _list_of_objects(data: Any, key: str, path: Path) -> list[dict[str, Any]]:
    items = data.get(key) if isinstance(data, dict) else None
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise UploadFormatError(f"{path.name}: '{key}' must be a list of objects")
    return items


def _text(entry: dict[str, Any], key: str, path: Path) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        raise UploadFormatError(f"{path.name}: an entry has no '{key}': {json.dumps(entry)[:200]}")
    return value


def _positive(entry: dict[str, Any], key: str, path: Path) -> float:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value) or value <= 0:
        raise UploadFormatError(f"{path.name}: {entry.get('name')!r:.200}: '{key}' must be a positive number, "
                                f"got {value!r:.40}")
    return float(value)


def _finite(value: object) -> bool:
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) < 2**63
    return isinstance(value, float) and math.isfinite(value)


Reader = Callable[[Path, Any, "str | None"], ParsedResults]
READERS: dict[str, Reader] = {
    "pytest-benchmark": _pytest_benchmark,
    "google-benchmark": _google_benchmark,
    "nvbench": _nvbench,
    "asv": _asv,
}
