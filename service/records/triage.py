"""Triage: people say what a change is. Every transition is kept in the change's history."""

from __future__ import annotations

from sqlmodel import Session

from roofwatch.common.vocabulary import TRIAGE_STATES, TriageState
from roofwatch.service.core.errors import TriageError
from roofwatch.service.core.models import Change, Repository, utcnow


def set_state(session: Session, change_id: int, state: str, note: str = "", actor: str = "",
              within: Repository | None = None) -> Change:
    """Move a change to ``state``; with ``within``, only a change of that repository."""
    if state not in TRIAGE_STATES:
        raise TriageError(f"unknown state {state!r}; one of {', '.join(TRIAGE_STATES)}")
    change = session.get(Change, change_id)
    if change is None:
        raise TriageError(f"no change {change_id}")
    if within is not None and change.repository_id != within.id:
        owner = session.get(Repository, change.repository_id)
        raise TriageError(f"change {change_id} belongs to {owner.full_name if owner else '?'}, not {within.full_name}")
    history = list(change.details.get("triage", []))
    history.append({"from": change.state, "to": state, "note": note, "by": actor, "at": utcnow().isoformat()})
    change.state = TriageState(state)
    change.details = {**change.details, "triage": history}
    session.add(change)
    session.flush()
    return change
