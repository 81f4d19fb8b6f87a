"""The words roofwatch's records are written in, and the named sets each rule reads them by.

On the ground floor, so that the service, the pure analysis, the dashboard and the workers read
the same words. Each state, trigger and kind is a ``StrEnum`` member, so it is stored, compared and serialised as
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


class AnalysisState(StrEnum):
    """How far a run has been read into its branch's history (``Run.analysis_state``)."""

    NOT_READ = ""  # not a run of the branch's history, or stored before analysis states were kept
    PENDING = "pending"  # stored; the history has not read it yet
    RUNNING = "running"  # being read (a run left so by a killed process shows as such, never as "no change")
    DONE = "done"
    FAILED = "failed"  # the reason is in ``Run.analysis_error``


def _plain(*members: StrEnum) -> tuple[str, ...]:
    """Members as plain strings: what a query binds, whatever the database driver makes of an enum."""
    return tuple(str(member) for member in members)


RUN_STATES = _plain(*RunState)
TRIGGERS = _plain(*Trigger)
TRIAGE_STATES = _plain(*TriageState)
CHANGE_KINDS = _plain(*ChangeKind)
ANALYSIS_STATES = _plain(*AnalysisState)

# A run that will not change any more.
TERMINAL_STATES = frozenset(_plain(RunState.SUCCEEDED, RunState.FAILED, RunState.ERRORED, RunState.CANCELLED,
                                   RunState.SKIPPED))
# A run (or comparison) that is waiting for a worker or being measured: what a newer head supersedes.
ACTIVE_STATES = _plain(RunState.QUEUED, RunState.RUNNING)
# A run that asks nothing of anyone: it measured and passed, or had nothing to measure.
PASSING_STATES = _plain(RunState.SUCCEEDED, RunState.SKIPPED)
# A comparison (or run) that ended with nothing to decide on: it is measured again, never read.
UNDECIDED_STATES = _plain(RunState.ERRORED, RunState.CANCELLED)
# A run whose suites ran to the end, so its measurements are a point of its series (a failed
# correctness suite does not make the timings wrong; an errored or cancelled run has none to trust).
MEASURED_STATES = _plain(RunState.SUCCEEDED, RunState.FAILED)
# A run whose changes are not known yet: the overview and the run page say so rather than "no change".
UNREAD_ANALYSIS_STATES = _plain(AnalysisState.PENDING, AnalysisState.RUNNING)

# Runs of the branch's own history: a point of each series, analysed in branch order. A pull
# request's head is not the branch; a bisection run is (it measures a commit between two of it),
# and so is an upload from a team's own CI (its candidates wait for a runner). Whatever its
# trigger, a run of a commit off the default branch (``Run.branch`` set: ``roofwatch run --rev
# feature``, a push to another tracked branch) is no part of it either
# (``roofwatch.service.records.runs.history_runs``).
BRANCH_HISTORY_TRIGGERS = _plain(Trigger.PUSH, Trigger.MANUAL, Trigger.BISECT, Trigger.SCHEDULE, Trigger.UPLOAD)
# Runs that may be the branch's head on the overview: the history's, less bisection, whose commit
# lies between two measured ones and is never the newest.
HEAD_TRIGGERS = _plain(Trigger.PUSH, Trigger.MANUAL, Trigger.SCHEDULE, Trigger.UPLOAD)
# Runs that never speak for the branch's newest state (``LatestMeasurement``), nor do runs off the branch.
LATEST_EXCLUDED_TRIGGERS = _plain(Trigger.PULL_REQUEST, Trigger.BISECT)
# Runs never drawn as a point of the branch's charts, nor returned by the series API (nor are runs off the branch).
OFF_BRANCH_TRIGGERS = _plain(Trigger.PULL_REQUEST)
# Runs whose progress GitHub shows (a commit status, a check run): what a push or a pull request started.
GITHUB_TRIGGERS = _plain(Trigger.PUSH, Trigger.PULL_REQUEST)

# Changes that wait for a person, listed first.
OPEN_STATES = _plain(TriageState.NEW, TriageState.ACKNOWLEDGED)
# Changes a person has closed: drawn apart on the charts, never counted as open.
CLOSED_STATES = _plain(TriageState.EXPECTED, TriageState.INVALID, TriageState.FIXED)
# Changes whose first bad commit is still worth narrowing to: a fixed bug's origin still matters;
# one judged expected or invalid needs no more commits measured.
NARROWED_STATES = _plain(TriageState.NEW, TriageState.ACKNOWLEDGED, TriageState.FIXED)

# A change in time (or throughput): what an A/B confirms. A correctness change needs no A/B: a
# failing test fails the same on every run.
PERFORMANCE_KINDS = _plain(ChangeKind.PERF_REGRESSION, ChangeKind.PERF_IMPROVEMENT)
CORRECTNESS_KINDS = _plain(ChangeKind.CORRECTNESS_FAILURE, ChangeKind.NUMERICS_DRIFT)
