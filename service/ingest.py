"""Envelope → rows. One transaction per envelope, and a redelivered envelope is a no-op."""

from __future__ import annotations

import statistics

from sqlmodel import Session, select

from service.fingerprint import benchmark_fingerprint
from service.models import (
    TERMINAL_STATES,
    Benchmark,
    Commit,
    Device,
    Measurement,
    Repository,
    Run,
    SuiteExecution,
    TestOutcome,
    utcnow,
)
from service.roofline_peaks import fraction_of_roofline, peaks_for
from suites.roofline import RooflineError
from workers.envelope import ENVELOPE_VERSION, DeviceInfo, Envelope, MeasurementRecord
from workers.errors import RoofwatchError

LOG_EXCERPT_LIMIT = 8000


class IngestError(RoofwatchError):
    """The envelope cannot be stored (unknown run, foreign version, key mismatch)."""


def parse_envelope(data: dict[str, object]) -> Envelope:
    version = data.get("version")
    if version != ENVELOPE_VERSION:
        raise IngestError(f"envelope version {version!r} is not supported (expected {ENVELOPE_VERSION})")
    return Envelope.model_validate(data)


def upsert_device(session: Session, info: DeviceInfo) -> Device:
    device = session.exec(select(Device).where(Device.fingerprint == info.fingerprint)).first()
    if device is None:
        device = Device(**info.model_dump(exclude={"fingerprint"}), fingerprint=info.fingerprint)
        session.add(device)
        session.flush()
    return device


def ingest_envelope(session: Session, envelope: Envelope) -> Run:
    run = session.get(Run, envelope.run_id)
    if run is None:
        raise IngestError(f"envelope for unknown run {envelope.run_id}")
    if run.idempotency_key != envelope.idempotency_key:
        raise IngestError(f"envelope key {envelope.idempotency_key!r} does not match run {run.id}")
    if run.state in TERMINAL_STATES and run.finished_at is not None:
        return run  # already stored by an earlier delivery

    repository = session.get(Repository, run.repository_id)
    assert repository is not None
    device = upsert_device(session, envelope.device)
    run.device_id = device.id
    _update_commit(session, run, envelope)

    run_id = envelope.run_id
    excerpts: list[str] = []
    for suite in envelope.suites:
        session.add(SuiteExecution(
            run_id=run_id, name=suite.name, kind=suite.kind, status=suite.status,
            reason=suite.reason, exit_code=suite.exit_code, duration_s=suite.duration_s,
            output_tail=suite.output_tail,
        ))
        if suite.status != "passed":
            excerpts.append(f"== {suite.name}: {suite.reason}\n{suite.output_tail[-2000:]}")
        for outcome in suite.outcomes:
            session.add(TestOutcome(run_id=run_id, suite=suite.name, **outcome.model_dump()))
        for record in suite.measurements:
            benchmark = upsert_benchmark(session, repository, suite.name, device, record)
            measurement, harness_error = _measurement(run_id, benchmark, device, record)
            session.add(measurement)
            if harness_error:
                excerpts.append(f"== harness error in {record.name}: {harness_error}")

    run.state = envelope.status
    run.error = envelope.reason
    run.log_excerpt = "\n".join(excerpts)[-LOG_EXCERPT_LIMIT:]
    run.started_at = run.started_at or envelope.started_at
    run.finished_at = envelope.finished_at or utcnow()
    session.add(run)
    session.flush()
    return run


def _update_commit(session: Session, run: Run, envelope: Envelope) -> None:
    commit = session.get(Commit, run.commit_id)
    if commit is None or envelope.commit is None:
        return
    commit.parents = envelope.commit.parents
    commit.author = envelope.commit.author or commit.author
    commit.message = envelope.commit.message or commit.message
    commit.committed_at = envelope.commit.committed_at or commit.committed_at
    session.add(commit)


def upsert_benchmark(session: Session, repository: Repository, suite: str, device: Device,
                      record: MeasurementRecord) -> Benchmark:
    fingerprint = benchmark_fingerprint(
        repository.full_name, suite, record.name, record.params, record.dtype, device.device_class
    )
    benchmark = session.exec(select(Benchmark).where(Benchmark.fingerprint == fingerprint)).first()
    if benchmark is None:
        benchmark = Benchmark(
            fingerprint=fingerprint, repository_id=repository.id, suite=suite, name=record.name,  # type: ignore[arg-type]
            params=record.params, dtype=record.dtype, shape=record.shape,
            impl=str(record.extra_info.get("impl") or ""), device_class=device.device_class,
        )
    # The declared work may be corrected in a later commit; the newest declaration wins.
    benchmark.flops = record.flops if record.flops is not None else benchmark.flops
    benchmark.bytes = record.bytes if record.bytes is not None else benchmark.bytes
    session.add(benchmark)
    session.flush()
    return benchmark


def _measurement(run_id: int, benchmark: Benchmark, device: Device,
                 record: MeasurementRecord) -> tuple[Measurement, str]:
    """The row for one benchmark result, and a harness error message ('' when sane)."""
    median = record.median
    achieved_flops = record.flops / median if record.flops and median > 0 else None
    achieved_bw = record.bytes / median if record.bytes and median > 0 else None
    fraction, harness_error = None, ""
    peaks = peaks_for(device)
    if peaks is not None and record.flops is not None and record.bytes and median > 0:
        try:
            fraction = fraction_of_roofline(peaks, record.flops, record.bytes, median, record.dtype)
        except RooflineError as exc:
            # Faster than the hardware allows: the declared work or the timer is wrong.
            # Store no fraction rather than a flattering one, and say so in the run's log.
            harness_error = str(exc)
    spread = statistics.pstdev(record.samples) if len(record.samples) > 1 else record.stddev
    row = Measurement(
        run_id=run_id, benchmark_id=benchmark.id,  # type: ignore[arg-type]
        samples=record.samples, median=median, iqr=record.iqr, min=record.min, mean=record.mean,
        n=record.n, cv=spread / record.mean if record.mean > 0 else 0.0,
        clock_mhz=_number(record.extra_info.get("sm_clock_mhz")),
        achieved_flops=achieved_flops, achieved_bandwidth=achieved_bw, roofline_fraction=fraction,
    )
    return row, harness_error


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None
