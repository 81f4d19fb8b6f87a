"""Parse what suites write: pytest JUnit XML and pytest-benchmark JSON.

Both parsers raise ``ResultFileError`` with a readable reason for a missing, truncated or
foreign file, so the runner can record the suite as failed and move on.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from roofwatch.workers.envelope import MeasurementRecord, OutcomeRecord
from roofwatch.workers.errors import ResultFileError

MESSAGE_LIMIT = 4000


def parse_junit(path: Path) -> list[OutcomeRecord]:
    """Test outcomes from pytest's ``--junitxml`` file.

    ``test_id`` is ``<classname>::<name>``, e.g. ``suites.correctness.test_softmax::test_softmax[fp32]``.
    ``max_abs_err`` / ``max_rel_err`` / ``beyond_half_ulp`` come from ``record_property`` entries
    of those names.
    """
    if not path.is_file() or path.stat().st_size == 0:
        raise ResultFileError(f"no JUnit XML written at {path.name}")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise ResultFileError(f"JUnit XML is not well-formed: {exc}") from exc
    if root.tag not in ("testsuites", "testsuite"):
        raise ResultFileError(f"not a JUnit XML report (root element <{root.tag}>)")
    return [_outcome(case) for case in root.iter("testcase")]


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


def parse_benchmark_json(path: Path) -> list[MeasurementRecord]:
    """Measurements from pytest-benchmark's ``--benchmark-json`` file (times in seconds)."""
    if not path.is_file() or path.stat().st_size == 0:
        raise ResultFileError(f"no benchmark JSON written at {path.name}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultFileError(f"benchmark file is not JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise ResultFileError("benchmark JSON has no 'benchmarks' list (not pytest-benchmark output?)")
    return [_measurement(entry) for entry in data["benchmarks"]]


def _measurement(entry: Any) -> MeasurementRecord:
    try:
        stats = entry["stats"]
        name = str(entry["name"])
        median, mean = float(stats["median"]), float(stats["mean"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ResultFileError(f"benchmark entry lacks name/stats: {exc!r}") from exc
    extra = entry.get("extra_info") or {}
    params = entry.get("param")
    samples = [float(x) for x in stats.get("data") or [] if _finite(x)]
    return MeasurementRecord(
        name=name,
        params="" if params is None else str(params),
        group=str(entry.get("group") or ""),
        samples=samples,
        median=median,
        iqr=float(stats.get("iqr") or 0.0),
        min=float(stats.get("min", median)),
        mean=mean,
        n=int(stats.get("rounds") or len(samples) or 1),
        stddev=float(stats.get("stddev") or 0.0),
        flops=_number(extra.get("flops")),
        bytes=_number(extra.get("bytes")),
        dtype=str(extra.get("dtype") or ""),
        shape=str(extra.get("shape") or ""),
        extra_info={k: v for k, v in extra.items() if isinstance(v, (str, int, float, bool))},
    )


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _number(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
