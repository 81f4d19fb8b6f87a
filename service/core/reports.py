"""The comparison report: what ``roofwatch compare --format json`` prints, what the PR comment, the
terminal table and the dashboard's compare page are rendered from — one typed shape for all of them.

``records.comparisons.comparison_report`` fills it from the database, ``roofwatch verdict`` from
result files (a subset: no database ids, no device); renderers read it and nothing else.
"""

from __future__ import annotations

from typing import Any, TypedDict


class BenchmarkVerdictRow(TypedDict, total=False):
    """One benchmark's A/B verdict. Times in the benchmark's ``unit`` (seconds for pytest-benchmark)."""

    benchmark: str
    suite: str
    unit: str
    higher_is_better: bool
    base_median: float | None
    head_median: float | None
    change_pct: float  # the paired change of the median time, %; + is slower
    ci_low: float
    ci_high: float
    confidence: float  # of this interval, which the verdict was decided with: 0.99, or a change's adjusted level
    p_value: float
    q_value: float
    noise_pct: float
    threshold_pct: float | None  # the change that counts (min_effect, or the noise when larger)
    mde_pct: float | None  # the smallest change this run could detect on it, at 80 % power
    direction: str  # regression | improvement | none | inconclusive
    reason: str
    rounds: int
    rounds_needed: int | None
    base_roofline: float | None
    head_roofline: float | None
    head_benchmark: str  # the head's name for it, where a declared rename paired two names
    # Why it moved, in one line (analysis.attribution): the kernels, environment or imported files that
    # differ, or "interaction: …" when none does; "" when the sides did not record what they ran.
    why: str
    cause: str  # kernels | environment | files | untraced | identical | unknown
    attribution: dict[str, Any]  # the details: what differs, and the evidence (modes, order) where shown


class NamedBenchmark(TypedDict, total=False):
    suite: str
    benchmark: str


class MissingBenchmark(TypedDict, total=False):
    """A benchmark of the base with no verdict, why, and who accepted that (if anyone did)."""

    suite: str
    benchmark: str
    reason: str
    accepted_by: str
    accepted_at: str
    accepted_via: str


class NewFailure(TypedDict, total=False):
    """A test function failing on the head but not on the base: its failing parametrizations as one."""

    suite: str
    test_id: str  # its one failing test's id, or the function's when several parametrizations fail
    message: str  # the first failing parametrization's failure text
    tests: list[str]  # the failing tests' ids, in the order the suite ran them (absent: stored before grouping)


def failing_tests(failure: NewFailure) -> list[str]:
    """The tests a new failure stands for (one, for a failure stored before they were grouped)."""
    return list(failure.get("tests") or [failure.get("test_id", "")])


class SettingChangeRow(TypedDict):
    """A setting the head declares differently from what judged it; it takes effect after merge."""

    what: str
    before: str
    after: str


class ComparisonReport(TypedDict, total=False):
    id: int | None
    base: str | None
    head: str | None
    state: str
    verdict: str
    rounds: int
    purpose: str
    device: str | None
    error: str
    mde_pct: float | None  # the largest of the benchmarks': what the whole run could detect
    mde_benchmark: str | None  # the benchmark that sets it
    min_effect_pct: float | None
    confidence: float  # the level of the intervals decided with (abtest.CONFIDENCE); a change's row says its own
    new_failures: list[NewFailure]  # one per test function, its failing parametrizations listed
    fixed: list[Any]
    benchmarks: list[BenchmarkVerdictRow]
    compiled: dict[str, Any]
    suites_source: str
    budget_s: float | None
    spent_s: float | None
    max_rounds: int | None  # the round cap the rounds ran under
    stop_reason: str
    judged_by: str  # where both sides' suites and settings came from: never the head
    settings_changes: list[SettingChangeRow]
    missing_on_head: list[MissingBenchmark]  # accepted ones too, with who accepted them
    new_on_head: list[NamedBenchmark]
    missing_policy: str  # failure | neutral: the check's conclusion while one is missing and not accepted
    environment_changes: dict[str, list[str]]  # suite → how the head's own environment differs from the base's


# --- what a comparison's ``details`` column holds --------------------------------------------------


class PullRequestRef(TypedDict, total=False):
    number: int | None
    base_ref: str
    title: str


class Progress(TypedDict, total=False):
    """An A/B under way, after its latest round (``flows/comparison_progress``)."""

    round: int
    open_count: int
    open: list[str]  # the first ``OPEN_SHOWN`` still open, by key
    round_s: float
    eta_s: float
    updated_at: str


class Judgement(TypedDict):
    """What judged a comparison and where every benchmark of the base went (``records.comparisons``)."""

    judged_by: str
    missing_policy: str
    settings_changes: list[SettingChangeRow]
    missing_on_head: list[MissingBenchmark]
    new_on_head: list[NamedBenchmark]
    renamed: list[dict[str, Any]]  # {from: NamedBenchmark, to: NamedBenchmark, pending}


class Environments(TypedDict, total=False):
    """Each side's own environment per suite, and how the head's differs (absent: none declared)."""

    environments: dict[str, dict[str, Any]]
    environment_changes: dict[str, list[str]]


class ComparisonDetails(TypedDict, total=False):
    """Everything a comparison keeps beside its columns (``Comparison.details``, JSON), by who writes it.

    Read it with ``details_of`` and extend it with ``add_details`` (``core/comparison_details.py``), so
    the type checker knows every key and its type; the column itself stays plain JSON.
    """

    # When it is made: flows/ab.prepare and the flow that asked (pull request, compare, upload).
    pull_request: PullRequestRef
    base_ref: str  # the revision `roofwatch compare` was given as the base
    task_id: str  # the A/B chain's Celery task id, to revoke when a newer head supersedes it
    max_rounds: int | None
    uploaded: bool  # judged from a team's uploaded result files, not measured here
    # While it runs: flows/comparison_progress.
    progress: Progress
    # From its rounds: records/comparisons.store_ab (an upload's: flows/upload).
    new_failures: list[NewFailure]
    fixed: list[Any]
    mde_pct: float | None
    min_effect_pct: float | None
    budget_s: float | None
    spent_s: float
    confidence: float
    adjusted_confidence: dict[str, float]  # suite::name → the higher level a change was decided at
    stop_reason: str
    compiled: dict[str, Any]
    suites_source: str
    judged_by: str
    missing_policy: str
    settings_changes: list[SettingChangeRow]
    missing_on_head: list[MissingBenchmark]
    new_on_head: list[NamedBenchmark]
    renamed: list[dict[str, Any]]
    rounds_run: list[dict[str, Any]]
    left_open: list[str]
    environments: dict[str, dict[str, Any]]
    environment_changes: dict[str, list[str]]
    perf_verdict: str
    accepted_missing: list[dict[str, Any]]  # {benchmark: suite::name, by, at, via}
    # What a confirmation did with it: flows/confirmation.
    around: list[str]  # a search among the neighbours of a candidate named at this pair (last good, first bad)
    applied: bool
    changes: list[int]
    environment_shift: float | None
    inconclusive: bool
