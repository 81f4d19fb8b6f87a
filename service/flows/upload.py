"""Results a team's own CI measured, stored like roofwatch's own: ``roofwatch upload`` and ``POST /api/results``.

An upload becomes a run of trigger ``upload`` (or ``pull_request``) whose envelope is built here
instead of by a worker, so ingest, history analysis, the dashboard and triage treat it like
any other run. What an upload cannot do is said, not faked:

* Nothing is re-measured. A candidate change in the history cannot be confirmed by an A/B and
  a range cannot be bisected without a runner, so candidates are returned (and written into
  the run's log) as *unconfirmed* instead of being dispatched.
* A pull-request upload is compared with the base's uploaded run: two separate CI runs, not
  interleaved rounds, so the threshold is ``max(5 %, 3 × the series' run-to-run spread)``
  (50 % while fewer than 4 earlier uploads exist) and the comment says so.

Every check (file, repository, SHA, base, device) happens before the first row is written,
and all rows of one upload are written in one transaction: nothing is half-stored.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlmodel import Session, col, select

from roofwatch.ab import abtest, fdr
from roofwatch.common.envelope import CommitRecord, DeviceInfo, Envelope, SuiteResult
from roofwatch.common.redaction import redact_json
from roofwatch.common.vocabulary import AnalysisState, RunState, Trigger
from roofwatch.git import checkout
from roofwatch.result_files.uploads import ParsedResults, UploadFormatError, read_results
from roofwatch.service.analysis import compare, lifecycle, single_runs
from roofwatch.service.core import keys
from roofwatch.service.core.comparison_details import add_details
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.errors import UnknownRepository, UnknownRevision, UploadError
from roofwatch.service.core.models import (
    Benchmark,
    Change,
    Commit,
    Comparison,
    Device,
    Measurement,
    Repository,
    Run,
    utcnow,
)
from roofwatch.service.core.reports import MissingBenchmark, NamedBenchmark
from roofwatch.service.flows.detection import analyze_run
from roofwatch.service.records import acceptances, comparisons
from roofwatch.service.records.ingest import ingest_envelope, upsert_benchmark, upsert_device
from roofwatch.service.records.runs import upsert_commit
from roofwatch.service.records.series import benchmark_points

log = logging.getLogger(__name__)

UNCONFIRMED_NOTE = ("uploaded, not re-measured: confirmation (A/B) and bisection need a runner for this "
                    "repository's device class, so this candidate is not confirmed")


@dataclass(frozen=True)
class UploadRequest:
    repository: str  # a registered OWNER/NAME
    commit: str  # a SHA (or any revision name) the repository has
    path: Path
    fmt: str = "auto"
    device_class: str | None = None
    suite: str | None = None  # default: the format's name
    pr_number: int | None = None
    base: str | None = None  # with pr_number: the base commit, uploaded earlier


@dataclass
class UploadOutcome:
    run_id: int
    repository: str
    sha: str
    format: str
    device_class: str
    measurements: int
    created: bool  # False: the same file was uploaded for this commit before (nothing stored twice)
    skipped: list[str] = field(default_factory=list)
    unconfirmed: list[str] = field(default_factory=list)  # candidate changes no runner can confirm
    comparison_id: int | None = None
    verdict: str | None = None


def upload(session: Session, request: UploadRequest) -> UploadOutcome:
    """Check everything, then store the upload (and its PR comparison) in ``session``'s transaction."""
    parsed = read_results(request.path, request.fmt, request.device_class)
    device_class = _device_class(request, parsed)
    repository = session.exec(select(Repository).where(Repository.full_name == request.repository)).first()
    if repository is None:
        raise UnknownRepository(f"{request.repository!r} is not registered "
                                "(register it with `roofwatch repo add OWNER/NAME --clone-url URL`)")
    mirror = checkout.ensure_mirror(get_settings().mirrors_dir, repository.clone_url)
    head_info = _commit_in(mirror, request.commit, repository)
    base_run = None
    if request.pr_number is not None:
        if not request.base:
            raise UploadError("a pull-request upload needs --base SHA (the commit it is compared with)")
        base_info = _commit_in(mirror, request.base, repository)
        base_run = _uploaded_run(session, repository, base_info.sha, device_class)

    suite = request.suite or parsed.format
    digest = hashlib.sha256(request.path.read_bytes()).hexdigest()[:16]
    pr = f"#{request.pr_number}" if request.pr_number is not None else ""
    key = f"{repository.full_name}{pr}@{head_info.sha}:upload:{device_class}:{suite}:{digest}"
    found = session.exec(select(Run).where(Run.idempotency_key == key)).first()
    outcome = UploadOutcome(run_id=0, repository=repository.full_name, sha=head_info.sha, format=parsed.format,
                            device_class=device_class, measurements=len(parsed.measurements), created=found is None,
                            skipped=parsed.skipped)
    if found is not None:
        outcome.run_id = found.id  # type: ignore[assignment]
        return outcome

    commit = upsert_commit(session, repository, head_info)
    now = datetime.now(UTC)
    run = Run(repository_id=repository.id, commit_id=commit.id, idempotency_key=key,  # type: ignore[arg-type]
              trigger=Trigger.PULL_REQUEST if base_run else Trigger.UPLOAD, pr_number=request.pr_number,
              base_sha=_sha_of(session, base_run) if base_run else None, started_at=now)
    session.add(run)
    session.flush()
    outcome.run_id = run.id  # type: ignore[assignment]
    result = SuiteResult(name=suite, kind="benchmark", status="passed",
                         reason=f"uploaded {parsed.format} results ({request.path.name})",
                         measurements=parsed.measurements)
    # An uploaded file is text from a team's CI (benchmark names, params, context): it is
    # stored and shown like a measured run's, so the same redaction applies on the way in.
    result = SuiteResult.model_validate(redact_json(result.model_dump()))
    device = uploaded_device(device_class)
    if base_run is None:
        envelope = Envelope(run_id=run.id, idempotency_key=key, repository=repository.full_name,  # type: ignore[arg-type]
                            sha=head_info.sha, status="succeeded", commit=CommitRecord(**vars(head_info)),
                            device=device, suites=[result], started_at=now, finished_at=now)
        ingest_envelope(session, envelope)
        summary = analyze_run(session, run.id, lambda good, bad: checkout.rev_range(mirror, f"{good}..{bad}"))  # type: ignore[arg-type]
        run.analysis_state = AnalysisState.DONE  # in the upload's transaction: a failure rolls the whole upload back
        candidates = [session.get(Change, change_id) for change_id in summary.changes]
        outcome.unconfirmed = [_describe(c) for c in candidates if c is not None and c.phase != lifecycle.CONFIRMED]
        if outcome.unconfirmed:
            run.log_excerpt = "\n".join([run.log_excerpt, *(f"{line} ({UNCONFIRMED_NOTE})" for line in outcome.unconfirmed)]).strip()
            session.add(run)
    else:
        comparison = _compare_with_base(session, repository, run, base_run, upsert_device(session, device), result)
        outcome.comparison_id, outcome.verdict = comparison.id, comparison.verdict
    session.flush()
    return outcome


def uploaded_device(device_class: str) -> DeviceInfo:
    """The device record of uploads for ``device_class``: one per class, apart from measured devices.

    roofwatch knows nothing of the uploading machine beyond its class, so uploads get a device
    of their own (no peaks, no clocks) and never mix with runs a worker probed.
    """
    fingerprint = hashlib.sha256(f"uploaded:{device_class}".encode()).hexdigest()[:32]
    return DeviceInfo(device_class=device_class, fingerprint=fingerprint, hostname="uploaded")


def _device_class(request: UploadRequest, parsed: ParsedResults) -> str:
    if request.device_class:
        return request.device_class
    if parsed.format == "nvbench" and len(parsed.devices) == 1:
        return parsed.devices[0]
    raise UploadFormatError(f"name the device these {parsed.format} results were measured on with --device-class "
                            "(e.g. 'NVIDIA H100 80GB HBM3'): the file does not say")


def _commit_in(mirror: Path, rev: str, repository: Repository) -> checkout.CommitInfo:
    try:
        return checkout.commit_info(mirror, checkout.resolve(mirror, rev))
    except UnknownRevision as exc:
        raise UploadError(f"{rev!r} is not a commit of {repository.full_name} "
                          f"(fetched from {repository.clone_url})") from exc


def _uploaded_run(session: Session, repository: Repository, sha: str, device_class: str) -> Run:
    """The base's latest uploaded run on ``device_class``; its absence or another device is an error."""
    rows = session.exec(select(Run, Device).join(Commit, col(Run.commit_id) == col(Commit.id))
                        .join(Device, col(Run.device_id) == col(Device.id))
                        .where(Run.repository_id == repository.id, Commit.sha == sha, Run.trigger == Trigger.UPLOAD,
                               Run.state == RunState.SUCCEEDED)
                        .order_by(col(Run.id).desc())).all()
    if not rows:
        raise UploadError(f"no uploaded results for the base {sha[:12]}: upload them first "
                          f"(`roofwatch upload FILE --repo {repository.full_name} --commit {sha[:12]}`)")
    same = [run for run, device in rows if device.device_class == device_class]
    if not same:
        raise UploadError(f"device mismatch: the base {sha[:12]} was uploaded for "
                          f"{', '.join(sorted({d.device_class for _, d in rows}))}, this head for {device_class!r}")
    return same[0]


def _sha_of(session: Session, run: Run) -> str:
    commit = session.get(Commit, run.commit_id)
    assert commit is not None
    return commit.sha


def _describe(change: Change) -> str:
    return (f"candidate {change.kind} between {(change.range_start_sha or '')[:12]} and "
            f"{(change.range_end_sha or '')[:12]}")


def _compare_with_base(session: Session, repository: Repository, run: Run, base_run: Run, device: Device,
                       result: SuiteResult) -> Comparison:
    """The PR's verdict from two separate CI runs: Mann-Whitney on their samples, threshold widened by history."""
    base_rows = {m.benchmark_id: m for m in session.exec(select(Measurement).where(Measurement.run_id == base_run.id))}
    comparison = Comparison(repository_id=repository.id, base_commit_id=base_run.commit_id,  # type: ignore[arg-type]
                            head_commit_id=run.commit_id, device_id=device.id, purpose="upload", run_id=run.id,
                            idempotency_key=keys.upload_comparison_key(run.idempotency_key), state=RunState.SUCCEEDED,
                            rounds=0)
    session.add(comparison)
    session.flush()
    compared: list[tuple[Benchmark, Measurement, float, compare.Verdict, float | None]] = []
    reported: set[int] = set()
    new: list[NamedBenchmark] = []
    for record in result.measurements:
        benchmark: Benchmark = upsert_benchmark(session, repository, result.name, device, record)
        reported.add(benchmark.id)  # type: ignore[arg-type]
        base = base_rows.get(benchmark.id)  # type: ignore[arg-type]
        if base is None:
            new.append({"suite": benchmark.suite, "benchmark": benchmark.name})
            continue  # a new benchmark: nothing to compare it with
        history = [p.median for p in benchmark_points(session, benchmark.id, device.id)]  # type: ignore[arg-type]
        noise = compare.run_to_run_noise(history)
        verdict = single_runs.verdict(base.samples, record.samples, base.median, record.median,
                                      higher_is_better=benchmark.higher_is_better, run_noise=noise)
        compared.append((benchmark, base, record.median, verdict, noise))
    # Stored as an A/B's verdicts are, through the same function. One upload tests every benchmark
    # at once, so its q-values are Benjamini–Hochberg over them, as an A/B's are; with one median
    # per side there are no rounds to give power, and the smallest change it could report is the
    # threshold itself.
    q_values = fdr.adjust([verdict.p_value for *_, verdict, _noise in compared])
    verdicts: list[abtest.ABVerdict] = []
    for (benchmark, base, head_median, verdict, noise), q_value in zip(compared, q_values, strict=True):
        stored = abtest.ABVerdict(verdict.change_pct, verdict.ci_low, verdict.ci_high, verdict.p_value, q_value,
                                  100 * noise if noise is not None else 0.0, verdict.threshold_pct,
                                  verdict.threshold_pct, 0, verdict.direction, verdict.reason)
        comparisons.store_result(session, comparison, benchmark, device, stored, [base.median], [head_median])
        verdicts.append(stored)
    # Every benchmark of the base's upload is accounted for: one the head's file lacks is missing,
    # as in an A/B, and keeps the check from green until a maintainer accepts it.
    gone = [session.get(Benchmark, benchmark_id) for benchmark_id in base_rows if benchmark_id not in reported]
    missing: list[MissingBenchmark] = [{"suite": b.suite, "benchmark": b.name, "reason": "not in the head's uploaded results"}
               for b in gone if b is not None and b.suite == result.name]  # another suite's upload is not this one
    comparison.details = {}
    add_details(comparison, pull_request={"number": run.pr_number, "base_ref": repository.default_branch},
                uploaded=True, mde_pct=max((v.mde_pct for v in verdicts), default=None),
                new_failures=[], fixed=[], missing_on_head=missing, new_on_head=new,
                perf_verdict=abtest.overall(verdicts))
    acceptances.settle(session, comparison)
    comparison.finished_at = utcnow()
    run.state, run.device_id, run.finished_at = RunState.SUCCEEDED, device.id, utcnow()
    session.add_all([comparison, run])
    session.flush()
    log.info("upload %s: PR #%s %s vs %s: %s", run.id, run.pr_number, run.idempotency_key, base_run.id,
             comparison.verdict)
    return comparison


def upload_and_report(request: UploadRequest) -> UploadOutcome:
    """Store the upload in one transaction; then, for a pull request, post its status and comment."""
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.flows.pull_request import finish

    with session_scope() as session:
        outcome = upload(session, request)
    if outcome.created and outcome.comparison_id is not None:
        finish(outcome.comparison_id)
    return outcome
