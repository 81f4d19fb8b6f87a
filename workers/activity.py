"""What a worker is measuring right now, for an in-process progress display.

``roofwatch run`` in embedded mode measures its commits and, inside the same call, the
follow-ups their analysis starts: bisection runs of unmeasured commits and confirmation A/Bs.
Each suite start and finish is announced as an ``Activity`` naming its own run or comparison
and commits, so the display says what is being measured rather than the commit the user asked
for last. Why it is measured (manual, bisect, confirm, ...) is the submitter's to look up by id:
workers know jobs, not the service's reasons.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Activity:
    kind: Literal["run", "comparison"]
    id: int  # the run's or the comparison's id
    commits: tuple[str, ...]  # (sha,) for a run, (base sha, head sha) for a comparison
    suite: str
    event: str  # "start", or the suite's status when it finished
    round: int | None = None  # comparison: 1-based round, out of ``rounds`` at most
    rounds: int | None = None
    side: str | None = None  # comparison: "base" or "head"
    open: int | None = None  # comparison: benchmarks the round measures (None: every one, as in round one)
    eta_s: float | None = None  # comparison: seconds the open benchmarks still need, at the measured round time


Listener = Callable[[Activity], None]

# Set by an in-process caller (the CLI in embedded mode); nested work inherits it.
local_activity: ContextVar[Listener | None] = ContextVar("local_activity", default=None)


def announce(activity: Activity) -> None:
    listener = local_activity.get()
    if listener is not None:
        listener(activity)
