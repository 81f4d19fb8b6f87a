"""Progress lines that say what is measured and why: ``confirm 3f2a9c1..8e0b7d2 · round 3/8``.

Workers announce each suite of a run or comparison (``roofwatch.workers.activity.Activity``); the reason
it runs — the user's own commit, a bisection, a confirmation A/B — is the run's trigger or the
comparison's purpose, looked up once per id.
"""

from __future__ import annotations

from sqlmodel import Session

from roofwatch.service.core.comparison_details import details_of
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.models import Comparison, Run
from roofwatch.service.core.units import seconds
from roofwatch.workers.activity import Activity

# What each reason is called on the terminal; a reason not listed is shown as stored.
NARROWING = {"bisect": "bisect {commits} (narrowing)"}


def short(sha: str) -> str:
    return sha[:7]


def describe(activity: Activity, purpose: str, own_label: str | None = None) -> str:
    """One progress line; ``own_label`` names a commit the user asked for (its SHA and title)."""
    state = "running" if activity.event == "start" else activity.event
    if activity.kind == "comparison":
        base, head = activity.commits
        still = ""
        if activity.open is not None:
            still = f" · {activity.open} open" + (f", ~{seconds(activity.eta_s)} left" if activity.eta_s else "")
        return (f"{purpose} {short(base)}..{short(head)} · round {activity.round}/{activity.rounds}{still}"
                f" · {activity.side} {activity.suite}: {state}")
    if own_label is not None:
        return f"{own_label} · {activity.suite}: {state}"
    what = NARROWING.get(purpose, "{purpose} {commits}").format(purpose=purpose, commits=short(activity.commits[0]))
    return f"{what} · {activity.suite}: {state}"


class Purposes:
    """Why each run or comparison is measured, read from the database once per id."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, int], str] = {}

    def __call__(self, activity: Activity) -> str:
        key = (activity.kind, activity.id)
        if key not in self._known:
            with session_scope() as session:
                self._known[key] = self._look_up(session, activity)
        return self._known[key]

    @staticmethod
    def _look_up(session: Session, activity: Activity) -> str:
        if activity.kind == "comparison":
            comparison = session.get(Comparison, activity.id)
            if comparison is None:
                return "compare"
            named = details_of(comparison).get("around")
            # a confirmation's search among a candidate's neighbours spans several commits: say whose
            return f"seek the step named at {short(named[0])}..{short(named[1])} across" if named else comparison.purpose
        run = session.get(Run, activity.id)
        return run.trigger if run is not None else "measure"
