"""A maintainer accepts benchmarks missing on a comparison's head; a comparison's verdict counts them.

A benchmark of the base that the head no longer reports (deleted, deselected, renamed by the
head's own table, or timed with other options) keeps a pull request from green: the head must
not hide a regression by making a benchmark disappear. A maintainer's acceptance — the
``/roofwatch accept`` comment, ``POST /api/comparisons/{id}/accept-missing`` or
``roofwatch compare --accept-missing`` — is recorded with who and when (``MissingAcceptance``);
given on a pull request it holds for its later heads too.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlmodel import Session, col, or_, select

from roofwatch.common.vocabulary import MEASURED_STATES, Trigger
from roofwatch.service.core.comparison_details import add_details, details_of
from roofwatch.service.core.models import Comparison, MissingAcceptance, Run
from roofwatch.service.core.verdict_rows import GATED


def pr_number_of(session: Session, comparison: Comparison) -> int | None:
    """The pull request a comparison decides, if any."""
    if comparison.run_id is None:
        return None
    run = session.get(Run, comparison.run_id)
    return run.pr_number if run is not None and run.trigger == Trigger.PULL_REQUEST else None


def accepted(session: Session, comparison: Comparison) -> dict[str, MissingAcceptance]:
    """Acceptances that cover ``comparison``, by ``suite::name``: its own, and its pull request's."""
    number = pr_number_of(session, comparison)
    scope = [col(MissingAcceptance.comparison_id) == comparison.id]
    if number is not None:
        scope.append(col(MissingAcceptance.pr_number) == number)
    rows = session.exec(select(MissingAcceptance).where(
        MissingAcceptance.repository_id == comparison.repository_id, or_(*scope))
        .order_by(col(MissingAcceptance.id))).all()
    found: dict[str, MissingAcceptance] = {}
    for row in rows:
        found.setdefault(row.benchmark, row)
    return found


def missing_keys(comparison: Comparison) -> list[str]:
    return [f"{m['suite']}::{m['benchmark']}" for m in details_of(comparison).get("missing_on_head", [])]


def accept(session: Session, comparison: Comparison, by: str, via: str, names: list[str] | None = None) -> list[str]:
    """Record ``by``'s acceptance of the benchmarks missing on ``comparison``'s head (all, or those
    ``names`` — ``suite::name`` or a bare benchmark name — pick) and settle its verdict again.

    Returns the keys accepted now; a name that is not missing is a ``LookupError``.
    """
    keys = missing_keys(comparison)
    chosen = keys if not names else [k for k in keys if k in names or k.split("::", 1)[1] in names]
    unknown = [n for n in names or [] if not any(n in (k, k.split("::", 1)[1]) for k in keys)]
    if unknown:
        raise LookupError(f"not missing on the head of comparison {comparison.id}: {', '.join(sorted(unknown))}"
                          f" (missing: {', '.join(keys) or 'nothing'})")
    already = accepted(session, comparison)
    number = pr_number_of(session, comparison)
    fresh = [k for k in chosen if k not in already]
    for key in fresh:
        session.add(MissingAcceptance(repository_id=comparison.repository_id, pr_number=number,
                                      comparison_id=comparison.id, benchmark=key, accepted_by=by, via=via))
    session.flush()
    settle(session, comparison)
    return fresh


def settle(session: Session, comparison: Comparison) -> None:
    """The comparison's verdict from its benchmarks' verdicts, its new failures and what is still missing.

    A correctness failure and a proven regression decide whatever is missing; otherwise a missing
    benchmark no maintainer accepted makes the verdict ``missing`` (never green).
    """
    perf = details_of(comparison).get("perf_verdict")
    if perf is None or comparison.state not in MEASURED_STATES:
        return
    covered = accepted(session, comparison)
    acceptances: list[dict[str, Any]] = [
        {"benchmark": key, "by": row.accepted_by, "via": row.via, "at": _iso(row.accepted_at)}
        for key, row in sorted(covered.items()) if key in missing_keys(comparison)]
    open_keys = [k for k in missing_keys(comparison) if k not in covered]
    if details_of(comparison).get("new_failures"):
        verdict = "failure"
    elif open_keys and perf in GATED:
        verdict = "missing"
    else:
        verdict = perf
    comparison.verdict = verdict
    add_details(comparison, accepted_missing=acceptances)
    session.add(comparison)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")
