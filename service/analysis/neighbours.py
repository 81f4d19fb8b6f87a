"""Where a step named a commit or two off really lies: the A/Bs that find it among its neighbours.

The change-point search places a small step in loud noise to within a few commits, not always at
its commit (``changepoints.REACH``; on the acceptance histories 11 % of the steps it finds are named
1-3 commits off). A candidate is confirmed by an A/B of exactly the two commits it names, and a step
that lies one commit later leaves both of them the same code: the A/B finds nothing, and a real
regression would be dismissed for where it was named rather than for whether it is there.

A bisection by single runs goes wrong the same way when one run is far off. So a candidate whose
commit was read from single runs and whose pair shows no change is looked for among its neighbours,
by A/B alone (single runs are what placed it off): first one A/B across the span of commits the search
could have confused it with; nothing there rejects it. A change there is halved — the span's older
end against its middle — down to two adjacent commits, whose A/B confirms it as any candidate's
does. An A/B never compares more than the span, and a change is only ever confirmed on two
adjacent commits, so nothing outside the span can leak in, and no commit is named on a guess.

Pure: commits in, the next pair to measure or the verdict out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

SPAN = 3  # measured commits either side of the named pair: the change-point search's own reach (changepoints.REACH)

Verdict = Literal["confirmed", "rejected"]


@dataclass(frozen=True)
class Search:
    """A step sought in ``(commits[lo], commits[hi]]``: the first bad commit is one of ``commits[lo + 1:hi + 1]``.

    ``found``: an A/B already showed the step inside the span (else the span itself is measured first).
    """

    commits: tuple[str, ...]  # consecutive commits, oldest first
    lo: int
    hi: int
    found: bool = False

    @classmethod
    def around(cls, commits: Sequence[str], good: str, bad: str, span: int = SPAN) -> Search | None:
        """The search for a step named at ``(good, bad]`` whose A/B showed nothing, among ``commits`` (consecutive,
        oldest first, holding both); None when there is no neighbour to look at."""
        order = list(commits)
        if good not in order or bad not in order or order.index(bad) != order.index(good) + 1:
            raise ValueError("the named pair must be two adjacent commits of the span")
        lo, hi = max(order.index(good) - span, 0), min(order.index(bad) + span, len(order) - 1)
        if hi - lo <= 1:
            return None
        return cls(tuple(order[lo:hi + 1]), 0, hi - lo)

    def to_measure(self) -> tuple[str, str]:
        """The pair whose A/B comes next."""
        good, bad = self._pair()
        return self.commits[good], self.commits[bad]

    def _pair(self) -> tuple[int, int]:
        if not self.found or self.hi - self.lo == 1:
            return self.lo, self.hi
        return self.lo, (self.lo + self.hi) // 2

    def after(self, moved: bool) -> Search | Verdict:
        """What the A/B of ``to_measure()`` tells: the next search, or the verdict on the step.

        ``moved``: the A/B found the candidate's change (its direction, beyond its threshold). Two adjacent
        commits decide; the span showing nothing rejects; a half either holds the step or leaves it to the other.
        """
        good, bad = self._pair()
        adjacent = bad - good == 1
        if bad == self.hi:  # the whole span: measured first, or all that is left of it
            if adjacent:
                return "confirmed" if moved else "rejected"
            return replace(self, found=True) if moved else "rejected"
        if moved:  # the older half holds the step
            return "confirmed" if adjacent else replace(self, hi=bad)
        return replace(self, lo=bad)  # the newer half does

    def as_details(self) -> dict[str, object]:
        """How a change records its search (``Change.details["neighbours"]``)."""
        return {"commits": list(self.commits), "lo": self.lo, "hi": self.hi, "found": self.found}

    @classmethod
    def from_details(cls, details: dict[str, object]) -> Search:
        commits = details["commits"]
        assert isinstance(commits, list)
        return cls(tuple(str(c) for c in commits), int(details["lo"]), int(details["hi"]),  # type: ignore[call-overload]
                   bool(details["found"]))
