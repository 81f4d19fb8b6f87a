"""What the service's confirming A/Bs make of a detector's change points, were every A/B to see what is there.

A main-branch candidate is confirmed by an A/B of exactly the two commits either side of where it was
found; one the A/B shows nothing at is sought among its neighbours (``service/analysis/neighbours.py``).
Here each A/B is ideal — it finds a change exactly when its two commits straddle a true location step —
so the counts are what placement allows, not what a noisy A/B adds: the steps confirmed at their own
commit by the pair alone and with the search, and the A/Bs that cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.changepoints.histories import History
from roofwatch.service.analysis.neighbours import SPAN, Search


@dataclass(frozen=True)
class Confirmed:
    """Location steps confirmed at their commit, and the A/Bs measured, by the named pair alone and with the search."""

    by_pair: int
    with_search: int
    abs_by_pair: int
    abs_with_search: int

    def __add__(self, other: Confirmed) -> Confirmed:
        return Confirmed(self.by_pair + other.by_pair, self.with_search + other.with_search,
                         self.abs_by_pair + other.abs_by_pair, self.abs_with_search + other.abs_with_search)


NOTHING = Confirmed(0, 0, 0, 0)


def confirmed(history: History, detections: Sequence[int], span: int = SPAN) -> Confirmed:
    """``detections`` (indexes of the first commit after each change point) confirmed under ideal A/Bs."""
    steps = [c.index for c in history.changes if c.shift == "location"]
    commits = [str(i) for i in range(len(history.values))]

    def moved(good: int, bad: int) -> bool:
        return any(good < step <= bad for step in steps)

    by_pair: set[int] = set()
    searched: set[int] = set()
    abs_by_pair = abs_with_search = 0
    for index in detections:
        if not 0 < index < len(commits):
            continue  # no commit before it: nothing to compare
        abs_by_pair, abs_with_search = abs_by_pair + 1, abs_with_search + 1
        if moved(index - 1, index):
            by_pair.add(index)
            continue
        search: Search | str | None = Search.around(commits, str(index - 1), str(index), span)
        while isinstance(search, Search):
            good, bad = (int(c) for c in search.to_measure())
            abs_with_search += 1
            search = search.after(moved(good, bad))
            if search == "confirmed":
                searched.add(bad)
    return Confirmed(len(by_pair), len(by_pair | searched), abs_by_pair, abs_with_search)


def total(histories: Sequence[History], detections: Sequence[Sequence[int]]) -> Confirmed:
    out = NOTHING
    for history, found in zip(histories, detections, strict=True):
        out = out + confirmed(history, found)
    return out
