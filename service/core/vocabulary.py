"""The words roofwatch's records are written in, and the named sets each rule reads them by.

Each state, trigger and kind is a ``StrEnum`` member, so it is stored, compared and serialised as
the plain string it always was; a set that a rule depends on ("which runs speak for the branch")
is named here once, with the reason it holds what it holds, instead of spelled where it is used.
"""

from __future__ import annotations

from enum import StrEnum


class RunState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ERRORED = "errored"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"


class Trigger(StrEnum):
    PUSH = "push"
    PULL_REQUEST = "pull_request"
    MANUAL = "manual"
    BISECT = "bisect"
    SCHEDULE = "schedule"
    UPLOAD = "upload"


class TriageState(StrEnum):
    NEW = "new"
    ACKNOWLEDGED = "acknowledged"
    EXPECTED = "expected"
    INVALID = "invalid"
    FIXED = "fixed"


class ChangeKind(StrEnum):
    PERF_REGRESSION = "perf-regression"
    PERF_IMPROVEMENT = "perf-improvement"
    CORRECTNESS_FAILURE = "correctness-failure"
    NUMERICS_DRIFT = "numerics-drift"
    COMPILED_CODE = "compiled-code"




def _plain(*members: StrEnum) -> tuple[str, ...]:
    """Members as plain strings: what a query binds, whatever the database driver makes of an enum."""
    return tuple(str(member) for member in members)


RUN_STATES = _plain(*RunState)
TRIGGERS = _plain(*Trigger)
TRIAGE_STATES = _plain(*TriageState)
CHANGE_KINDS = _plain(*ChangeKind)

# A run that will not change any more.
TERMINAL_STATES = frozenset(_plain(RunState.SUCCEEDED, RunState.FAILED, RunState.ERRORED, RunState.CANCELLED,
                                   RunState.SKIPPED))
# A run whose suites ran to the end, so its measurements are a point of its series (a failed
# correctness suite does not make the timings wrong; an errored or cancelled run has none to trust).
MEASURED_STATES = _plain(RunState.SUCCEEDED, RunState.FAILED)

# Runs of the branch's own history: a point of each series, analysed in branch order. A pull
# request's head is not the branch; a bisection run is (it measures a commit between two of it),
# and so is an upload from a team's own CI (its candidates wait for a runner).
BRANCH_HISTORY_TRIGGERS = _plain(Trigger.PUSH, Trigger.MANUAL, Trigger.BISECT, Trigger.SCHEDULE, Trigger.UPLOAD)
# Runs that may be the branch's head on the overview: the history's, less bisection, whose commit
# lies between two measured ones and is never the newest.
HEAD_TRIGGERS = _plain(Trigger.PUSH, Trigger.MANUAL, Trigger.SCHEDULE, Trigger.UPLOAD)
# Runs that never speak for the branch's newest state (``LatestMeasurement``).
LATEST_EXCLUDED_TRIGGERS = _plain(Trigger.PULL_REQUEST, Trigger.BISECT)

# Changes that wait for a person, listed first.
OPEN_STATES = _plain(TriageState.NEW, TriageState.ACKNOWLEDGED)
