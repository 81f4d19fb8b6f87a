"""Put the rounds plugin where a sandboxed benchmark suite can import it, and the options that drive it.

As with the compile plugin, its modules are copied into the suite's scratch folder, as the package
``roofwatch_rounds``: the sandbox shows a suite its worktree, its scratch folder and the interpreter,
not roofwatch's own source.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofwatch.common.tree_files import UnsafePath, read_file
from roofwatch.workers.plugin_packages import copy_package
from roofwatch.workers.rounds import ran

PACKAGE = "roofwatch_rounds"
PLUGIN = f"{PACKAGE}.plugin"
SANDBOX_MODULES = ("__init__.py", "plugin.py", "ran.py")


@dataclass(frozen=True)
class Selection:
    """What one benchmark suite's process runs: ``names`` (None: every benchmark) in the order of ``seed``.

    ``calibration``: ``{name: (iterations, seconds)}`` an earlier round of the same side calibrated;
    those benchmarks are not calibrated again.
    """

    names: frozenset[str] | None = None
    seed: int | None = None
    calibration: Mapping[str, tuple[int, float]] = field(default_factory=dict)


def install_plugin(scratch: Path) -> Path:
    """Copy the plugin package under ``scratch``; the folder to add to the suite's PYTHONPATH."""
    source = Path(__file__).parent
    return copy_package(scratch / "rounds-plugin", PACKAGE, ((source / name, name) for name in SANDBOX_MODULES))


def plugin_args(selection: Selection, scratch: Path, tree: Path | None = None) -> tuple[list[str], Path]:
    """The command-line options for ``selection``, and the file the plugin records its order in; with
    ``tree``, the plugin also records what each benchmark ran (the files of ``tree`` it imported, the
    kernels it launched)."""
    record = scratch / "rounds.json"
    args = ["-p", PLUGIN, f"--roofwatch-record={record}"]
    if tree is not None:
        args.append(f"--roofwatch-ran-root={tree}")
    if selection.names is not None:
        keep = scratch / "keep.json"
        keep.write_text(json.dumps(sorted(selection.names)), encoding="utf-8")
        args.append(f"--roofwatch-keep={keep}")
    if selection.seed is not None:
        args.append(f"--roofwatch-order-seed={selection.seed}")
    if selection.calibration:
        given = scratch / "calibration.json"
        given.write_text(json.dumps({name: list(pair) for name, pair in selection.calibration.items()}),
                         encoding="utf-8")
        args.append(f"--roofwatch-calibration={given}")
    return args, record


ORDER_LIMIT = 100_000  # node ids (and calibrations) kept from one process's record
ITERATIONS_LIMIT = 10**9  # pytest-benchmark multiplies by ten while calibrating; a count beyond this is garbage
RECORD_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Recorded:
    """What the plugin wrote: the node ids in the order run, what each benchmark ran (by name) and the
    calibrations it made (``{name: (iterations, seconds)}``)."""

    order: list[str]
    ran: dict[str, dict[str, Any]]
    calibration: dict[str, tuple[int, float]]


def _read_record(record: Path) -> dict[str, object]:
    # Written inside the suite's process, which the commit's code controls: read as an untrusted
    # file (no links, bounded), and only what each reader checks is taken from it.
    try:
        data = json.loads(read_file(record, RECORD_BYTES) or b"{}")
    except (UnsafePath, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def read_record(record: Path) -> Recorded:
    """Everything the plugin recorded, read once; each part empty when the suite wrote none or garbage."""
    data = _read_record(record)
    return Recorded(_order(data), _ran(data), _calibration(data))


def read_order(record: Path) -> list[str]:
    """The node ids the plugin recorded, in the order run; [] when the suite wrote none or garbage."""
    return _order(_read_record(record))


def read_calibration(record: Path) -> dict[str, tuple[int, float]]:
    """``{name: (iterations, seconds)}`` the plugin recorded; entries that are not that are left out.

    A wrong entry can only change how many iterations the same side's later rounds time per round
    of its own benchmark — never the other side's — and is bounded like pytest-benchmark's own.
    """
    return _calibration(_read_record(record))


def _order(data: dict[str, object]) -> list[str]:
    order = data.get("order")
    if not isinstance(order, list):
        return []
    return [node[:1000] for node in order[:ORDER_LIMIT] if isinstance(node, str)]


def _calibration(data: dict[str, object]) -> dict[str, tuple[int, float]]:
    calibration = data.get("calibration")
    if not isinstance(calibration, dict):
        return {}
    out: dict[str, tuple[int, float]] = {}
    for name, pair in list(calibration.items())[:ORDER_LIMIT]:
        if isinstance(name, str) and len(name) <= 1000 and isinstance(pair, list) and len(pair) == 2 \
                and isinstance(pair[0], int) and 1 <= pair[0] <= ITERATIONS_LIMIT \
                and isinstance(pair[1], (int, float)) and math.isfinite(pair[1]) and pair[1] > 0:
            out[name] = (pair[0], float(pair[1]))
    return out


def _ran(data: dict[str, object]) -> dict[str, dict[str, Any]]:
    found = data.get("ran")
    records: dict[str, dict[str, Any]] = {}
    if isinstance(found, dict):
        for name, value in list(found.items())[:ORDER_LIMIT]:
            if isinstance(name, str) and (cleaned := ran_record(value)) is not None:
                records[name[:1000]] = cleaned
    return records


TEXT = 200  # characters of one recorded path, name or value


def ran_record(value: object) -> dict[str, Any] | None:
    """One benchmark's record of what it ran, in its bounds; None when it is not one.

    ``{"files": {path: hash}, "kernels": [{"kernel": name, "source": hash, <launch values>}],
    "complete": bool, "notes": [text]}``: a record cut here is marked incomplete, since what was cut
    could be what changed.
    """
    if not isinstance(value, dict) or not isinstance(value.get("files"), dict) \
            or not isinstance(value.get("kernels"), list):
        return None
    complete = value.get("complete") is True
    files = {path[:TEXT]: digest[:64] for path, digest in list(value["files"].items())[:ran.FILES_LIMIT]
             if isinstance(path, str) and isinstance(digest, str)}
    kernels = []
    for launch in value["kernels"][:ran.LAUNCHES_LIMIT]:
        if not isinstance(launch, dict) or not isinstance(launch.get("kernel"), str):
            complete = False
            continue
        kernels.append({str(k)[:TEXT]: (v[:TEXT] if isinstance(v, str) else v)
                        for k, v in list(launch.items())[:64]
                        if isinstance(v, (str, int, float, bool)) or v is None})
    if len(files) < len(value["files"]) or len(kernels) < len(value["kernels"]):
        complete = False
    notes = [n[:300] for n in value.get("notes", [])[:8] if isinstance(n, str)] \
        if isinstance(value.get("notes"), list) else []
    record: dict[str, Any] = {"files": files, "kernels": kernels, "complete": complete}
    if notes:
        record["notes"] = notes
    return record
