"""What the JSON API shows of each record: response models, as the FastAPI template's ``…Public``.

A route returns its rows; FastAPI serialises them through these models, so only the fields
declared here leave the service, and every text a secret could reach (a clone URL with a token,
a suite's output, an error, a test's message, a comparison's details) is redacted by its type
(``Redacted``), whoever wrote the row and however it was stored. A new column stays private until
it is added here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict

from roofwatch.common.redaction import redact, redact_json
from roofwatch.common.vocabulary import AnalysisState, RunState, Trigger

Redacted = Annotated[str, AfterValidator(redact)]
RedactedJson = Annotated[dict[str, Any], AfterValidator(redact_json)]


class Public(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class RepositoryPublic(Public):
    id: int | None
    full_name: str
    clone_url: Redacted  # https://x-access-token:…@ is never shown
    default_branch: str
    trust_policy: str
    installation_id: int | None
    suite_network: bool
    created_at: datetime


class RunPublic(Public):
    id: int | None
    repository_id: int
    commit_id: int
    trigger: Trigger
    pr_number: int | None
    base_sha: str | None
    # "" for a run of the default branch; else the branch of a commit off it (kept off its history).
    branch: str
    device_id: int | None
    state: RunState
    idempotency_key: str
    log_excerpt: Redacted
    error: Redacted
    suites_source: str
    analysis_state: AnalysisState
    analysis_error: Redacted
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class CommitPublic(Public):
    id: int | None
    repository_id: int
    sha: str
    parents: list[str]
    author: str
    message: Redacted
    committed_at: datetime | None
    position: int | None


class DevicePublic(Public):
    id: int | None
    fingerprint: str
    device_class: str
    uuid: str
    driver: str
    cuda: str
    torch_version: str
    triton_version: str
    peak_bandwidth: float | None
    peak_flops: dict[str, float]
    peaks_source: str
    cache_roofs: dict[str, dict[str, float]]
    sm_clock_mhz: float | None
    power_limit_w: float | None
    l2_bytes: int | None
    hostname: str
    environment_shifts: int
    created_at: datetime


class SuiteExecutionPublic(Public):
    id: int | None
    run_id: int
    name: str
    kind: str
    status: str
    reason: Redacted
    exit_code: int | None
    duration_s: float
    output_tail: Redacted
    # The commit's own environment the suite ran in, where it declares one: {digest, python, packages}.
    environment: RedactedJson
    # Where the suite's files came from when not from the commit: {paths, repository, ref, commit, digest}.
    suite_files: RedactedJson
    order: dict[str, Any]  # a benchmark suite's process: {"seed", "order": [node id, ...]} as run


class TestOutcomePublic(Public):
    id: int | None
    run_id: int
    suite: str
    test_id: str
    outcome: str
    message: Redacted
    duration_s: float
    max_abs_err: float | None
    max_rel_err: float | None
    beyond_half_ulp: float | None


class BenchmarkPublic(Public):
    id: int | None
    fingerprint: str
    repository_id: int
    suite: str
    name: str
    params: str
    dtype: str
    shape: str
    impl: str
    device_class: str
    unit: str
    higher_is_better: bool
    flops: float | None
    bytes: float | None


class ComparisonPublic(Public):
    id: int | None
    repository_id: int
    base_commit_id: int
    head_commit_id: int
    device_id: int | None
    purpose: str
    run_id: int | None
    state: RunState
    verdict: str
    rounds: int
    idempotency_key: str
    error: Redacted
    details: RedactedJson
    created_at: datetime
    finished_at: datetime | None


class ComparisonResultPublic(Public):
    benchmark: str
    suite: str
    benchmark_id: int
    id: int | None
    comparison_id: int
    base_values: list[float]
    head_values: list[float]
    base_median: float | None
    head_median: float | None
    change_pct: float
    ci_low: float
    ci_high: float
    p_value: float
    q_value: float
    noise_pct: float
    threshold_pct: float | None
    mde_pct: float | None
    direction: str
    reason: Redacted
    base_roofline: float | None
    head_roofline: float | None
    attribution: RedactedJson  # why it moved: cause, one line of why, what differs, the evidence


class MeasurementPublic(Public):
    benchmark: str
    benchmark_id: int | None
    median: float
    iqr: float
    n: int
    cv: float
    achieved_flops: float | None
    achieved_bandwidth: float | None
    roofline_fraction: float | None
    ran: dict[str, Any]  # what it ran: the repository files it imported (path → hash), the kernels it launched


class RunDetail(Public):
    run: RunPublic
    commit: CommitPublic | None
    device: DevicePublic | None
    suites: list[SuiteExecutionPublic]
    outcomes: list[TestOutcomePublic]
    measurements: list[MeasurementPublic]


class SeriesPage(Public):
    benchmark: BenchmarkPublic
    points: list[dict[str, Any]]  # the columns of records.queries.series_page, one object per measurement
    next_before: int | None
    next: str | None
    # Where the suite's files from outside the commit (suites_from, suites_repo) changed among these points:
    # {kind: "benchmark-files", position, sha, run_id, before, after}, before/after each {paths, repository,
    # ref, commit, digest} ({}: the commit's own files). An event on the series, never a new series.
    events: list[RedactedJson]


class ComparisonDetail(Public):
    comparison: ComparisonPublic
    base: CommitPublic | None
    head: CommitPublic | None
    results: list[ComparisonResultPublic]
