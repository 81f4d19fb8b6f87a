"""The evidence for an interaction: the modes a benchmark's processes fall in, and what ran before it.

Pure: per-process values in, words and numbers out. Identical code that moves between processes
usually moves between a few levels — a fast mode and a slow one — and which a process lands in
depends on what it ran before the benchmark (a file, a cache, an allocator state another
benchmark leaves behind) or on the machine. An A/B whose sides fall in different modes reports a
change that no line of the benchmark caused; these say which side sat in which mode, round by
round, and whether one benchmark running before it decides the mode.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SEPARATED = 2.0  # Ashman's D above which two groups of log-values are two modes, not one spread
MIN_GAP = math.log(1.05)  # modes closer than 5 % are not worth naming
MIN_PROCESSES = 4  # processes an order dependence needs, at least 2 in each mode
NAMES_SHOWN = 3


@dataclass(frozen=True)
class Process:
    """One process's measurement of one benchmark: its side, round, value and what ran before it.

    ``positions`` (benchmark name → its place in the process's order) is the process's own, shared by
    every benchmark it measured; ``position`` is this benchmark's place (None: not in the recorded order).
    """

    side: str  # base | head
    index: int  # the round
    value: float
    positions: Mapping[str, int] = field(default_factory=dict, compare=False)
    position: int | None = None

    def ran_before(self, name: str) -> bool:
        """Did ``name`` run earlier in the same process?"""
        earlier = self.positions.get(name)
        return earlier is not None and self.position is not None and earlier < self.position


@dataclass(frozen=True)
class Modes:
    """Two modes of a benchmark's per-process values (in its unit), and each process's."""

    fast: float  # the median of the lower mode
    slow: float
    slow_processes: dict[tuple[str, int], bool]  # (side, round) → in the slow mode

    def count(self, side: str) -> tuple[int, int]:
        """(processes of ``side`` in the slow mode, processes of ``side``)."""
        marks = [slow for (s, _), slow in self.slow_processes.items() if s == side]
        return sum(marks), len(marks)


def modes(processes: Sequence[Process]) -> Modes | None:
    """The two modes of the values (a 2-means split of their logs), or None when they form one.

    Two groups count as modes when they are further apart than their spread (Ashman's D ≥ 2) and
    at least ``MIN_GAP`` apart.
    """
    values = sorted((math.log(p.value), i) for i, p in enumerate(processes) if p.value > 0)
    if len(values) < 3:
        return None
    logs = [v for v, _ in values]
    best: tuple[float, int] | None = None
    for cut in range(1, len(logs)):
        low, high = logs[:cut], logs[cut:]
        cost = _sum_squares(low) + _sum_squares(high)
        if best is None or cost < best[0]:
            best = (cost, cut)
    assert best is not None
    low, high = logs[:best[1]], logs[best[1]:]
    gap = _mean(high) - _mean(low)
    spread = math.sqrt(_variance(low) + _variance(high))
    if gap < MIN_GAP or (spread > 0 and math.sqrt(2) * gap / spread < SEPARATED):
        return None
    slow = {index for _, index in values[best[1]:]}
    return Modes(math.exp(_median(low)), math.exp(_median(high)),
                 {(p.side, p.index): i in slow for i, p in enumerate(processes)})


def order_dependence(processes: Sequence[Process], found: Modes) -> dict[str, Any] | None:
    """The benchmark whose running earlier in the same process decides the mode, if one does.

    A candidate decides it when the processes it ran before are exactly those in one mode (one
    exception allowed per eight processes), with at least two processes on each side of the split.
    """
    measured = [p for p in processes if (p.side, p.index) in found.slow_processes]
    if len(measured) < MIN_PROCESSES:
        return None
    slow = [found.slow_processes[(p.side, p.index)] for p in measured]
    if sum(slow) < 2 or len(slow) - sum(slow) < 2:
        return None
    allowed = len(measured) // 8
    candidates = sorted({name for p in measured for name, at in p.positions.items()
                         if p.position is not None and at < p.position})
    best: tuple[int, str, bool] | None = None
    for name in candidates:
        ran = [p.ran_before(name) for p in measured]
        if sum(ran) < 2 or len(ran) - sum(ran) < 2:
            continue
        for slows_it in (True, False):
            misses = sum(r != (s if slows_it else not s) for r, s in zip(ran, slow, strict=True))
            if misses <= allowed and (best is None or misses < best[0]):
                best = (misses, name, slows_it)
    if best is None:
        return None
    misses, name, slows_it = best
    after = [s for p, s in zip(measured, slow, strict=True) if p.ran_before(name)]
    not_after = [s for p, s in zip(measured, slow, strict=True) if not p.ran_before(name)]
    mode, other = ("slow", "fast") if slows_it else ("fast", "slow")
    in_mode = sum(after) if slows_it else len(after) - sum(after)
    elsewhere = len(not_after) - sum(not_after) if slows_it else sum(not_after)
    return {"after": name, "mode": mode,
            "line": f"order-dependent: {mode} in {in_mode} of {len(after)} processes where {name} ran before it, "
                    f"{other} in {elsewhere} of {len(not_after)} where it did not"}


def evidence(processes: Sequence[Process], unit: str = "s") -> dict[str, Any]:
    """What an interaction's reader is shown: the modes and which side sat in which, per round."""
    found = modes(processes)
    if found is None:
        base = [p.value for p in processes if p.side == "base"]
        head = [p.value for p in processes if p.side == "head"]
        line = (f"one mode: base ≈ {_quantity(_median(base), unit)}, head ≈ {_quantity(_median(head), unit)} "
                "in every round" if base and head else "")
        return {"line": line} if line else {}
    rounds = sorted({p.index for p in processes})
    per_round = [{"round": i + 1, **{p.side: "slow" if found.slow_processes[(p.side, p.index)] else "fast"
                                     for p in processes if p.index == i}} for i in rounds]
    sides = []
    for side in ("base", "head"):
        slow, total = found.count(side)
        if total:
            sides.append(f"{side} slow in {slow} of {total}" if slow * 2 >= total else
                         f"{side} fast in {total - slow} of {total}")
    out: dict[str, Any] = {
        "modes": [found.fast, found.slow], "rounds": per_round,
        "line": f"modes ≈ {_quantity(found.fast, unit)} and ≈ {_quantity(found.slow, unit)}: {', '.join(sides)}",
    }
    order = order_dependence(processes, found)
    if order is not None:
        out["order_dependent"] = order
    return out


def _quantity(value: float, unit: str) -> str:
    if unit != "s":
        return f"{value:.4g} {unit}"
    for scale, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if value >= scale:
            return f"{value / scale:.3g} {name}"
    return f"{value / 1e-9:.3g} ns"


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _variance(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = _mean(values)
    return sum((v - mean) ** 2 for v in values) / (len(values) - 1)


def _sum_squares(values: Sequence[float]) -> float:
    mean = _mean(values)
    return sum((v - mean) ** 2 for v in values)


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
