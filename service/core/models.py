"""Database tables (SQLModel). Alembic owns the schema: see ``service/core/migrations``.

Units: times in seconds, bandwidth in bytes/s, throughput in FLOP/s, sizes in bytes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Dialect, Index, UniqueConstraint
from sqlalchemy.types import TypeDecorator
from sqlmodel import AutoString, Field, SQLModel

from roofwatch.common.vocabulary import AnalysisState, ChangeKind, RunState, TriageState, Trigger


def utcnow() -> datetime:
    return datetime.now(UTC)


class Words(TypeDecorator[StrEnum]):
    """A column of one vocabulary (``roofwatch.common.vocabulary``): stored as the plain string it always
    was, so the schema and every stored row stay as they are, and read back as its member. A word the
    vocabulary lacks fails where it is written, not where a page reads it later; one already stored (by
    hand, or by a roofwatch older than its migrations) is read back as the string it is, never a 500."""

    impl = AutoString
    cache_ok = True

    def __init__(self, words: type[StrEnum]) -> None:
        super().__init__()
        self.words = words

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else str(self.words(value))

    def process_result_value(self, value: Any, dialect: Dialect) -> StrEnum | None:
        if value is None:
            return None
        try:
            return self.words(value)
        except ValueError:
            return value  # type: ignore[no-any-return]


# Whose pull requests run without a maintainer's approval (see roofwatch.service.github.trust).
TRUST_POLICIES = ("maintainers-only", "everyone")


# Primary keys are INTEGER columns: 32-bit on PostgreSQL. A larger id in a URL is a bad request
# (422), not a database error.
ROW_ID_MAX = 2**31 - 1


class Repository(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    full_name: str = Field(unique=True, index=True)
    clone_url: str
    default_branch: str = "main"
    # "maintainers-only": fork / outside-collaborator PRs wait for a maintainer's approval.
    trust_policy: str = "maintainers-only"
    # GitHub App installation that covers this repository (from webhooks); None in token mode.
    # GitHub ids are 64-bit.
    installation_id: int | None = Field(default=None, sa_type=BigInteger)
    # The operator's switch: this repository's suites may reach the network (setup always may).
    suite_network: bool = False
    created_at: datetime = Field(default_factory=utcnow)


class UploadToken(SQLModel, table=True):
    """A repository's upload token: it may store results for that repository and do nothing else.

    Only a SHA-256 of the token is kept; the token itself is shown once, when it is made.
    """

    id: int | None = Field(default=None, primary_key=True)
    repository_id: int = Field(foreign_key="repository.id", index=True)
    token_sha256: str = Field(unique=True, index=True, max_length=64)
    label: str = ""
    created_at: datetime = Field(default_factory=utcnow)
    revoked_at: datetime | None = None


class PullRequestHead(SQLModel, table=True):
    """A head SHA a pull request had, and when roofwatch heard of it: what an approval refers to."""

    __table_args__ = (UniqueConstraint("repository_id", "number", "sha"),
                      Index("ix_pullrequesthead_repository_number", "repository_id", "number"))

    id: int | None = Field(default=None, primary_key=True)
    repository_id: int = Field(foreign_key="repository.id")
    number: int = Field(sa_type=BigInteger)
    sha: str = Field(max_length=64)
    seen_at: datetime = Field(default_factory=utcnow)


class MissingAcceptance(SQLModel, table=True):
    """A maintainer's word that a benchmark of the base may be missing on the head of a comparison.

    Deleted, deselected or renamed by the head's own table: until this is given, a pull request
    whose head no longer reports a benchmark of its base is not green. Given for a pull request
    (``pr_number``), it holds for later heads of the same pull request; given for a comparison
    without one (``roofwatch compare --accept-missing``), for that comparison only.
    """

    id: int | None = Field(default=None, primary_key=True)
    repository_id: int = Field(foreign_key="repository.id", index=True)
    pr_number: int | None = Field(default=None, sa_type=BigInteger)
    comparison_id: int | None = Field(default=None, foreign_key="comparison.id", index=True)
    benchmark: str  # "suite::name" as the base reports it
    accepted_by: str  # a GitHub login, an API token's label, or the local user of `roofwatch compare`
    via: str  # comment | api | cli
    accepted_at: datetime = Field(default_factory=utcnow)


class Commit(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("repository_id", "sha"),)

    id: int | None = Field(default=None, primary_key=True)
    repository_id: int = Field(foreign_key="repository.id", index=True)
    sha: str = Field(index=True, max_length=64)
    parents: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    author: str = ""
    message: str = ""
    committed_at: datetime | None = None
    # First-parent position on its branch (commits on the chain, itself included). History,
    # baselines and charts are ordered by it: committer dates can be equal or go backwards.
    position: int | None = Field(default=None, index=True)


class Device(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    # Hash of everything that must match for two measurements to be comparable.
    fingerprint: str = Field(unique=True, index=True, max_length=64)
    device_class: str = Field(index=True)
    uuid: str = ""
    driver: str = ""
    cuda: str = ""
    torch_version: str = ""
    triton_version: str = ""
    peak_bandwidth: float | None = None
    peak_flops: dict[str, float] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    peaks_source: str = "none"  # "measured" | "datasheet" | "none"
    # Measured cache-level roofs: {"L2": {"capacity": bytes, "bandwidth": bytes/s}, "L3": {...}}.
    cache_roofs: dict[str, dict[str, float]] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    sm_clock_mhz: float | None = None
    power_limit_w: float | None = None
    l2_bytes: int | None = None
    hostname: str = ""
    # A/Bs in which one side moved almost every benchmark by one factor: the machine, not the
    # code. Counted as a health signal for the device; such an A/B is measured again.
    environment_shifts: int = 0
    created_at: datetime = Field(default_factory=utcnow)


class Run(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    repository_id: int = Field(foreign_key="repository.id", index=True)
    commit_id: int = Field(foreign_key="commit.id", index=True)
    trigger: Trigger = Field(default=Trigger.MANUAL, sa_type=Words(Trigger))
    pr_number: int | None = None
    # A pull request's merge-base; for a run off the default branch, where its branch left it.
    base_sha: str | None = None
    # "" for a run of the default branch's history. Otherwise the branch (or tag) of a commit that
    # is not on the default branch's first-parent history (`roofwatch run --rev feature`, a push to a
    # branch ROOFWATCH_PUSH_BRANCHES tracks): such a run is stored and shown on its own page, but is
    # never a point of the default branch's series, its head or a baseline of its change detection.
    branch: str = Field(default="", sa_column_kwargs={"server_default": ""})
    device_id: int | None = Field(default=None, foreign_key="device.id", index=True)
    state: RunState = Field(default=RunState.QUEUED, index=True, sa_type=Words(RunState))
    # Same key, same run: a redelivered task or a repeated trigger never makes a second row.
    idempotency_key: str = Field(unique=True, index=True)
    log_excerpt: str = ""
    error: str = ""
    # Which suites ran and why: the commit's pyproject.toml or a stored config version (precedence).
    suites_source: str = ""
    # Reading the run into its history, after it is stored (``AnalysisState``).
    analysis_state: AnalysisState = Field(default=AnalysisState.NOT_READ, sa_type=Words(AnalysisState),
                                          sa_column_kwargs={"server_default": ""})
    analysis_error: str = Field(default="", sa_column_kwargs={"server_default": ""})
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None


class SuiteConfig(SQLModel, table=True):
    """Suites of a repository kept outside it (TOML); every version is kept, the newest is in force."""

    __table_args__ = (UniqueConstraint("repository_id", "version"),)

    id: int | None = Field(default=None, primary_key=True)
    repository_id: int = Field(foreign_key="repository.id", index=True)
    version: int
    content: str  # the TOML, as given
    origin: str = ""  # the file name it was read from
    created_at: datetime = Field(default_factory=utcnow)


class SuiteExecution(SQLModel, table=True):
    """One suite command on one run: how it ended and why."""

    __table_args__ = (UniqueConstraint("run_id", "name"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id", index=True)
    name: str
    kind: str
    status: str  # passed | failed | errored | timeout
    reason: str = ""
    exit_code: int | None = None
    duration_s: float = 0.0
    output_tail: str = ""
    # The commit's own environment the suite ran in, where it declares one: {"digest", "python", "packages"}.
    environment: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False,
                                                                               server_default="{}"))
    # Where the suite's files came from when not from the commit (a ``suites_from`` backfill or a
    # ``suites_repo``): {"paths", "repository", "ref", "commit", "digest"}; {} for the commit's own.
    # A digest that differs from the previous point's is an event on the suite's series, never a new series.
    suite_files: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False,
                                                                               server_default="{}"))
    # A benchmark suite's order: {"seed": N or null, "order": [node id, ...]} as its process ran them.
    order: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False, server_default="{}"))


class Benchmark(SQLModel, table=True):
    """A series: everything that must match for two results to be comparable."""

    id: int | None = Field(default=None, primary_key=True)
    fingerprint: str = Field(unique=True, index=True, max_length=64)
    repository_id: int = Field(foreign_key="repository.id", index=True)
    suite: str
    name: str = Field(index=True)
    params: str = ""
    dtype: str = ""
    shape: str = ""
    # Which implementation this series times: "" (the kernel under test), or a baseline such as
    # "torch" / "torch.compile", from the benchmark's ``extra_info["impl"]``.
    impl: str = ""
    device_class: str = Field(index=True)
    unit: str = "s"
    higher_is_better: bool = False
    flops: float | None = None
    bytes: float | None = None


# What a series read takes from each measurement (trend lines, the roofline, the series API).
SERIES_COLUMNS = ("median", "iqr", "min", "n", "cv", "achieved_flops", "achieved_bandwidth", "roofline_fraction")


class Measurement(SQLModel, table=True):
    __table_args__ = (
        UniqueConstraint("run_id", "benchmark_id"),
        # Rows are stored run by run, so one benchmark's points lie one per heap page: a 2,000-point
        # series read through a plain benchmark_id index touched 2,000 pages. Keyed (benchmark, run)
        # and carrying the series columns, this index answers such reads on its own (PostgreSQL
        # index-only scans; SQLite ignores INCLUDE and gets the plain composite index).
        Index("ix_measurement_benchmark_run", "benchmark_id", "run_id", postgresql_include=list(SERIES_COLUMNS)),
    )

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id", index=True)
    benchmark_id: int = Field(foreign_key="benchmark.id")  # indexed first in ix_measurement_benchmark_run
    samples: list[float] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    median: float
    iqr: float
    min: float
    mean: float
    n: int
    cv: float
    clock_mhz: float | None = None
    achieved_flops: float | None = None
    achieved_bandwidth: float | None = None
    roofline_fraction: float | None = None
    # What the benchmark ran in this run's process: the repository's files it imported (path → hash)
    # and the Triton kernels it launched (name, source hash, launch values, autotune choice); see
    # roofwatch/workers/rounds/ran.py. {}: not recorded (an upload, an older worker).
    ran: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False, server_default="{}"))


class LatestMeasurement(SQLModel, table=True):
    """Each series' newest measurement on its branch, kept at ingest: one row per benchmark.

    The roofline and the overview ask "where does every kernel stand now"; answered from
    ``measurement`` that is one index probe per benchmark into a table that grows with every
    commit, here a read of a table as long as the list of benchmarks. "Newest" is the highest run
    id among runs that measure the branch head: pull-request heads may never land, and bisection
    re-measures old commits under new run ids (``LATEST_EXCLUDED_TRIGGERS``).
    """

    benchmark_id: int = Field(foreign_key="benchmark.id", primary_key=True, sa_column_kwargs={"autoincrement": False})
    run_id: int = Field(foreign_key="run.id", index=True)
    median: float
    iqr: float
    n: int
    achieved_flops: float | None = None
    achieved_bandwidth: float | None = None
    roofline_fraction: float | None = None




class TestOutcome(SQLModel, table=True):
    __test__ = False  # keep pytest from collecting the table as a test class
    __table_args__ = (UniqueConstraint("run_id", "suite", "test_id"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id", index=True)
    suite: str
    test_id: str = Field(index=True)
    outcome: str  # passed | failed | error | skipped
    message: str = ""
    duration_s: float = 0.0
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    # Share of an fp16/bf16 output's elements beyond half an ulp of the exact value: 0 for a
    # correctly rounded kernel, so new arithmetic (a reordered sum, an extra rounding) shows.
    beyond_half_ulp: float | None = None


class Change(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    repository_id: int = Field(foreign_key="repository.id", index=True)
    benchmark_id: int | None = Field(default=None, foreign_key="benchmark.id", index=True)
    suite: str = ""
    test_id: str | None = None
    kind: ChangeKind = Field(sa_type=Words(ChangeKind))
    # Where the change is in its lifecycle: candidate -> narrowing -> confirming -> confirmed |
    # rejected (see roofwatch.service.analysis.lifecycle). Only confirmed changes are shown.
    phase: str = Field(default="candidate", index=True)
    # The device (and so the series' epoch: its fingerprint) the change was seen on.
    device_id: int | None = Field(default=None, foreign_key="device.id", index=True)
    first_bad_commit_id: int | None = Field(default=None, foreign_key="commit.id")
    # The step lies after the last good commit and at or before the first bad one seen.
    range_start_sha: str | None = None
    range_end_sha: str | None = None
    range_start_position: int | None = None
    range_end_position: int | None = None
    change_pct: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    state: TriageState = Field(default=TriageState.NEW, index=True, sa_type=Words(TriageState))
    detected_run_id: int | None = Field(default=None, foreign_key="run.id")
    details: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class CompiledArtifact(SQLModel, table=True):
    """One Triton kernel specialization compiled for one target on one run (a compile suite).

    Sizes in bytes; ``registers`` per thread; ``spill_bytes`` local memory per thread.
    ``tests`` names the tests (benchmarks) that launched it, linking it to timing series.
    ``toolchain`` is the Triton/ptxas pair that produced it: comparing across toolchains
    compares compilers, not commits.
    """

    __table_args__ = (Index("ix_compiledartifact_run_kernel", "run_id", "kernel"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id", index=True)
    suite: str
    kernel: str
    specialization: str
    target: str
    status: str  # compiled | failed
    reason: str = ""
    registers: int | None = None
    spill_bytes: int | None = None
    stack_bytes: int | None = None
    shared_bytes: int | None = None
    ptx_bytes: int | None = None
    sass_bytes: int | None = None
    sass_instructions: int | None = None
    instructions: dict[str, int] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    tests: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    sass_hash: str = ""
    toolchain: str = ""


DELIVERY_OUTCOMES = ("accepted", "ignored", "failed")


class WebhookDelivery(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    delivery_id: str = Field(unique=True, index=True)
    event: str
    action: str = ""
    repository: str = ""
    received_at: datetime = Field(default_factory=utcnow)
    outcome: str = ""
    detail: str = ""  # why it was ignored, what it started, or what went wrong


class GitHubReport(SQLModel, table=True):
    """The latest thing roofwatch wants GitHub to show for one target, and whether it is there yet.

    One row per (repository, target, subject) — a commit status or check run per head SHA, one
    comment per pull request — holding the *desired* state. Publishing bumps ``version``;
    delivery sends whatever is newest, so a retry after an outage never posts a stale
    "pending" over a final verdict, and a report that could not be posted waits here until
    it can be.
    """

    __table_args__ = (UniqueConstraint("repository_id", "target", "subject"),)

    id: int | None = Field(default=None, primary_key=True)
    repository_id: int = Field(foreign_key="repository.id", index=True)
    target: str  # status | check_run | comment
    subject: str  # head SHA for status / check_run, PR number for comment
    payload: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    version: int = 1
    delivered_version: int = 0
    external_id: str = ""  # check run id or comment id once GitHub has one
    attempts: int = 0
    last_error: str = ""
    next_attempt_at: datetime = Field(default_factory=utcnow, index=True)
    updated_at: datetime = Field(default_factory=utcnow)


class Comparison(SQLModel, table=True):
    """An interleaved A/B of two commits on one device: a PR verdict, or the confirmation of a change."""

    id: int | None = Field(default=None, primary_key=True)
    repository_id: int = Field(foreign_key="repository.id", index=True)
    base_commit_id: int = Field(foreign_key="commit.id", index=True)
    head_commit_id: int = Field(foreign_key="commit.id", index=True)
    device_id: int | None = Field(default=None, foreign_key="device.id", index=True)
    purpose: str = "manual"  # pull_request | confirm | manual | upload
    run_id: int | None = Field(default=None, foreign_key="run.id", index=True)  # the PR run it decides
    state: RunState = Field(default=RunState.QUEUED, index=True, sa_type=Words(RunState))  # a run's states, less skipped
    # regression | improvement | no-change | inconclusive | failure | errored | cancelled, or "missing":
    # no change proven, but a benchmark of the base is missing on the head and no maintainer accepted it.
    verdict: str = ""
    rounds: int = 0
    # Same key, same comparison: a redelivered task or a repeated request makes no second row.
    idempotency_key: str = Field(unique=True, index=True)
    error: str = ""
    details: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None


class ComparisonResult(SQLModel, table=True):
    """One benchmark's verdict in a comparison, with the per-round medians it rests on."""

    __table_args__ = (UniqueConstraint("comparison_id", "benchmark_id"),)

    id: int | None = Field(default=None, primary_key=True)
    comparison_id: int = Field(foreign_key="comparison.id", index=True)
    benchmark_id: int = Field(foreign_key="benchmark.id", index=True)
    base_values: list[float] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    head_values: list[float] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    base_median: float | None = None
    head_median: float | None = None
    change_pct: float = 0.0
    ci_low: float = 0.0
    ci_high: float = 0.0
    p_value: float = 1.0
    q_value: float = 1.0
    noise_pct: float = 0.0
    threshold_pct: float | None = None
    mde_pct: float | None = None
    direction: str = "inconclusive"
    reason: str = ""
    base_roofline: float | None = None
    head_roofline: float | None = None
    # Why it moved (roofwatch.service.analysis.attribution): the cause, its one line, what differs
    # between what each side ran, and for an interaction the evidence. {}: nothing recorded.
    attribution: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False,
                                                                               server_default="{}"))
