"""The result envelope: everything a GPU worker learned about one commit, as versioned JSON.

It is the only thing that travels from a worker to the service (through the ``ingest``
queue), so it carries no credentials and no database ids beyond the run it answers.
Bump ``ENVELOPE_VERSION`` on any incompatible change; ingest refuses versions it does not know.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

ENVELOPE_VERSION = 1


class DeviceInfo(BaseModel):
    device_class: str
    fingerprint: str
    uuid: str = ""
    driver: str = ""
    cuda: str = ""
    torch_version: str = ""
    triton_version: str = ""
    sm_clock_mhz: float | None = None
    power_limit_w: float | None = None
    l2_bytes: int | None = None
    hostname: str = ""
    # Peaks measured by `roofwatch calibrate` on this device: bytes/s, and FLOP/s by dtype name
    # (fp32, tf32, fp16, bf16, fp8). Optional with empty defaults, so envelopes and
    # register_device messages from workers that predate them still validate; that is why
    # ENVELOPE_VERSION did not change. Empty means "not measured", never "zero".
    peak_bandwidth: float | None = None
    peak_flops: dict[str, float] = Field(default_factory=dict)
    # Cache-level roofs from the same calibration: {"L2": {"capacity": bytes, "bandwidth": bytes/s}}.
    cache_roofs: dict[str, dict[str, float]] = Field(default_factory=dict)
    # Where the peaks come from when not "measured": "modelled" for a device a repository declares
    # (workers/modelled_device.py). Empty: measured by calibration, or no peaks at all.
    peaks_source: str = ""


class OutcomeRecord(BaseModel):
    test_id: str
    outcome: Literal["passed", "failed", "error", "skipped"]
    message: str = ""
    duration_s: float = 0.0
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    # Share (0 to 1) of an fp16/bf16 output's elements further than half an ulp from the exact
    # value (roofwatch.testing.record_rounding). Optional, so envelopes from workers that
    # predate it still validate.
    beyond_half_ulp: float | None = None


class MeasurementRecord(BaseModel):
    """One pytest-benchmark entry. Times in seconds per call; a derived peak-memory record
    (``roofwatch.common.metrics``) in bytes, ``unit`` saying which."""

    name: str
    params: str = ""
    group: str = ""
    samples: list[float] = Field(default_factory=list)
    median: float
    iqr: float
    min: float
    mean: float
    n: int
    stddev: float = 0.0
    flops: float | None = None  # FLOP per call
    bytes: float | None = None  # compulsory bytes moved per call
    dtype: str = ""
    shape: str = ""
    extra_info: dict[str, object] = Field(default_factory=dict)
    # pytest-benchmark's ``options`` of this measurement (timer, rounds, warm-up, ...): an A/B pairs
    # a base and a head measurement only when these agree. Optional, so older envelopes validate.
    timing: dict[str, str | float | bool] = Field(default_factory=dict)
    # What median, min, mean and samples are in: "s", or "B" for a peak-memory record. Optional
    # with the default every earlier envelope meant, so they still validate.
    unit: str = "s"
    # What the benchmark ran, as the rounds plugin recorded it in its process (workers/rounds/ran.py):
    # {"files": {path: hash}, "kernels": [launch], "complete": bool, "notes": [...]}. Empty: not
    # recorded (an upload, an older worker). Optional, so older envelopes validate.
    ran: dict[str, Any] = Field(default_factory=dict)


class CompiledArtifactRecord(BaseModel):
    """One Triton kernel specialization compiled for one target GPU (a ``kind = "compile"`` suite).

    Sizes in bytes; ``registers`` per thread; ``spill_bytes`` is the local memory per thread
    ptxas spilled to; ``shared_bytes`` is what one block needs (Triton's dynamic allocation
    plus static). ``status`` is ``failed`` when the kernel does not compile for the target or
    needs more than the target has, with the compiler's message in ``reason``.
    """

    kernel: str
    specialization: str
    target: str
    status: Literal["compiled", "failed"]
    reason: str = ""
    registers: int | None = None
    spill_bytes: int | None = None
    stack_bytes: int | None = None
    shared_bytes: int | None = None
    ptx_bytes: int | None = None
    sass_bytes: int | None = None
    sass_instructions: int | None = None
    instructions: dict[str, int] = Field(default_factory=dict)
    sass_hash: str = ""
    toolchain: str = ""  # e.g. "triton 3.9.0, ptxas 12.9.86": a change starts a new epoch
    compile_s: float = 0.0
    tests: list[str] = Field(default_factory=list)  # the tests (benchmarks) that launched it


class SuiteResult(BaseModel):
    name: str
    kind: Literal["correctness", "benchmark", "compile"]
    status: Literal["passed", "failed", "errored", "timeout"]
    reason: str = ""
    exit_code: int | None = None
    duration_s: float = 0.0
    output_tail: str = ""
    outcomes: list[OutcomeRecord] = Field(default_factory=list)
    measurements: list[MeasurementRecord] = Field(default_factory=list)
    # Optional with an empty default, so envelopes from workers without compile suites still
    # validate; ENVELOPE_VERSION did not change.
    artifacts: list[CompiledArtifactRecord] = Field(default_factory=list)
    # A benchmark suite under the rounds plugin: the benchmarks it was asked to run (None: all),
    # the seed of its order and the node ids in the order they ran.
    selected: list[str] | None = None
    order_seed: int | None = None
    order: list[str] = Field(default_factory=list)
    # pytest-benchmark's calibration per benchmark, {name: (iterations, seconds)}: the A/B's later
    # rounds of the same side reuse it. Only the worker reads it; never sent or stored.
    calibration: dict[str, tuple[int, float]] = Field(default_factory=dict, exclude=True)
    # How many of the benchmarks this process measured ran on such a reused calibration.
    calibrations_reused: int = 0
    # The suite's own environment, where it declares one: {"digest", "python", "packages": {name: version}}.
    environment: dict[str, Any] = Field(default_factory=dict)
    # Where the suite's files came from when not from the commit (suites_from, suites_repo):
    # {"paths", "repository", "ref", "commit", "digest"}. Optional, so earlier envelopes validate.
    suite_files: dict[str, Any] = Field(default_factory=dict)


class CommitRecord(BaseModel):
    sha: str
    parents: list[str] = Field(default_factory=list)
    author: str = ""
    message: str = ""
    committed_at: datetime | None = None
    # First-parent position: the number of commits on its first-parent chain, itself included.
    position: int | None = None


class Envelope(BaseModel):
    version: int = ENVELOPE_VERSION
    run_id: int
    idempotency_key: str
    repository: str
    sha: str
    status: Literal["succeeded", "failed", "errored", "skipped"]
    reason: str = ""
    commit: CommitRecord | None = None
    device: DeviceInfo
    suites: list[SuiteResult] = Field(default_factory=list)
    started_at: datetime
    finished_at: datetime
    # Where the suites came from (the commit's pyproject.toml or a stored config, and why):
    # optional with a default, so envelopes of workers that predate it still validate.
    suites_source: str = ""


class SettingChange(BaseModel):
    """One setting a pull request's head declares differently from what judged it: ``what`` was ``before``
    and would be ``after`` once merged (all text, as the two commits' tables say it)."""

    what: str
    before: str
    after: str


class RoundRecord(BaseModel):
    """One side of one A/B round: the suites run in a fresh process for that commit."""

    side: Literal["base", "head"]
    index: int
    suites: list[SuiteResult] = Field(default_factory=list)


class ABEnvelope(BaseModel):
    """What a worker learned from an interleaved A/B comparison of two commits.

    Round 0 runs every suite of both commits (so correctness can be compared too); later
    rounds run only the benchmark suites, alternating which side goes first.
    """

    version: int = ENVELOPE_VERSION
    kind: Literal["ab"] = "ab"
    comparison_id: int
    idempotency_key: str
    repository: str
    base_sha: str
    head_sha: str
    status: Literal["succeeded", "failed", "errored"]
    reason: str = ""
    base_commit: CommitRecord | None = None
    head_commit: CommitRecord | None = None
    device: DeviceInfo
    rounds: list[RoundRecord] = Field(default_factory=list)
    started_at: datetime
    finished_at: datetime
    # As on Envelope: where the suites came from ("base: …; head: …" when the sides differ).
    suites_source: str = ""
    # What counts, as the head's config declares it: the repository's min_effect and each
    # benchmark's ("suite::name" → fraction), so the service decides with the worker's numbers.
    min_effect: float = 0.02
    min_effects: dict[str, float] = Field(default_factory=dict)
    # The wall-time budget for rounds (seconds; None: only the round cap) and why rounds stopped:
    # "decided", "round cap", "budget" or "cannot settle".
    budget_s: float | None = None
    stop_reason: str = ""
    # What judged both sides (the stored config, else the base commit: never the head) and what the
    # head's own [tool.roofwatch] would change once merged. Optional, so older envelopes validate.
    judged_by: str = ""
    settings_changes: list[SettingChange] = Field(default_factory=list)
    # Declared renames (old → new benchmark name) from the judging side, and those only the head
    # declares: these pair the two names too, but count as missing until a maintainer accepts them.
    renamed: dict[str, str] = Field(default_factory=dict)
    head_renamed: dict[str, str] = Field(default_factory=dict)
    # The judging side's word on a check whose head misses a benchmark of the base: "failure" or "neutral".
    missing_policy: Literal["failure", "neutral"] = "failure"
    # Benchmarks (suite::name) still undecided when rounds stopped at the budget or the round cap.
    left_open: list[str] = Field(default_factory=list)
    # The round cap the rounds ran under (the judging side's ab_max_rounds may have set it), so what is
    # shown can say how many more would settle an open benchmark. None: an envelope that predates it.
    max_rounds: int | None = None
    # The paths that differ between the two commits (git diff --name-only), which tell whether a
    # benchmark whose recorded code is identical could still have been reached by a change (a data
    # file, a CUDA source). None: not known (too many, or an envelope that predates it).
    changed_files: list[str] | None = None
