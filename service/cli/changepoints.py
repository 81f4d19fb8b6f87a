"""``roofwatch changepoints --csv FILE``: change points in a history kept outside roofwatch.

The file has a ``commit`` column, then one numeric column per benchmark, one row per
commit, oldest first (DESIGN §4). Empty cells are missing measurements; anything else that
is not a number is an error naming its row and column, never a silent zero.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofwatch.service.analysis import changepoints
from roofwatch.service.core.errors import CsvHistoryError

MISSING = {"", "nan", "na", "null", "none", "-"}


@dataclass
class History:
    commits: list[str]
    columns: dict[str, list[float]]


def read_history(path: Path) -> History:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise CsvHistoryError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise CsvHistoryError(f"{path} is not UTF-8 text") from exc
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if not header or header[0].strip().lower() != "commit":
        raise CsvHistoryError(f"{path}: the first column must be `commit` (got {header[0] if header else 'nothing'!r})")
    names = [h.strip() for h in header[1:]]
    if not names:
        raise CsvHistoryError(f"{path}: no benchmark columns after `commit`")
    commits: list[str] = []
    columns: dict[str, list[float]] = {name: [] for name in names}
    for line, row in enumerate(reader, start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) > len(header):
            raise CsvHistoryError(f"{path}:{line}: {len(row)} cells for {len(header)} columns")
        commits.append(row[0].strip())
        for name, cell in zip(names, [*row[1:], *[""] * (len(names) - len(row) + 1)]):
            columns[name].append(_number(cell, path, line, name))
    return History(commits, columns)


def _number(cell: str, path: Path, line: int, column: str) -> float:
    text = cell.strip()
    if text.lower() in MISSING:
        return math.nan
    try:
        return float(text)
    except ValueError:
        raise CsvHistoryError(f"{path}:{line}: column {column!r} holds {text[:40]!r}, not a number") from None


def find(history: History, min_effect: float) -> dict[str, list[dict[str, Any]]]:
    """The ``changepoints --format json`` contract: per column, its change points of at least ``min_effect``.

    An external history has no A/B to hold a candidate to the team's floor, so the floor is applied here:
    a step well inside it is not worth a reader's time even where the series is quiet enough to show it.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for name, values in history.columns.items():
        out[name] = [{
            "index": cp.index, "commit": history.commits[cp.index], "before": cp.before, "after": cp.after,
            "change_pct": cp.change_pct, "p_value": cp.p_value, "ci_low": cp.ci_low, "ci_high": cp.ci_high,
            "shift": cp.shift, "modes": list(cp.modes) if cp.modes else None,
            "slow_share": list(cp.slow_share) if cp.slow_share else None,
        } for cp in changepoints.detect(values, min_effect=min_effect)]
    return out
