"""Envelope → rows. One transaction per envelope, and a redelivered envelope is a no-op."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
from sqlalchemy import String, any_, bindparam, insert
from sqlalchemy import update as sa_update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlmodel import Session, col, select

from roofwatch.common.envelope import ENVELOPE_VERSION, DeviceInfo, Envelope, MeasurementRecord
from roofwatch.common.metrics import is_memory_suite
from roofwatch.common.redaction import redact_json
from roofwatch.common.sampling import reservoir, seed_for
from roofwatch.common.vocabulary import MEASURED_STATES, TERMINAL_STATES, AnalysisState, RunState
from roofwatch.roofline import Peaks, RooflineError
from roofwatch.service.core.errors import IngestError
from roofwatch.service.core.fingerprint import benchmark_fingerprint
from roofwatch.service.core.models import (
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
from roofwatch.service.records import compiled_artifacts, latest
from roofwatch.service.records.roofline import fraction_of_roofline, peaks_for
from roofwatch.service.records.storable import storable_envelope

LOG_EXCERPT_LIMIT = 8000
LOOKUP_BATCH = 500


def parse_envelope(data: dict[str, object]) -> Envelope:
    version = data.get("version")
    if version != ENVELOPE_VERSION:
        raise IngestError(f"envelope version {version!r} is not supported (expected {ENVELOPE_VERSION})")
    # What a suite printed is stored and shown: a credential in it goes no further than here.
    return Envelope.model_validate(redact_json(data))


def upsert_device(session: Session, info: DeviceInfo) -> Device:
    """The row for ``info``'s fingerprint; measured peaks in ``info`` replace the stored ones.

    Envelopes and announcements without peaks leave stored peaks alone: a run never erases
    a calibration.
    """
    device = session.exec(select(Device).where(Device.fingerprint == info.fingerprint)).first()
    if device is None:
        device = Device(**info.model_dump(exclude={"fingerprint", "peak_bandwidth", "peak_flops", "cache_roofs",
                                                   "peaks_source"}),
                        fingerprint=info.fingerprint)
    elif not (info.peak_bandwidth and info.peak_flops):
        return device
    if info.peak_bandwidth and info.peak_flops:
        device.peak_bandwidth = info.peak_bandwidth
        device.peak_flops = dict(info.peak_flops)
        device.cache_roofs = {name: dict(roof) for name, roof in info.cache_roofs.items()}
        device.peaks_source = info.peaks_source or "measured"
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
    envelope = storable_envelope(envelope)
    device = upsert_device(session, envelope.device)
    run.device_id = device.id
    _update_commit(session, run, envelope)

    run_id = envelope.run_id
    excerpts: list[str] = []
    outcomes: list[dict[str, object]] = []
    records: list[tuple[str, MeasurementRecord]] = []
    for suite in envelope.suites:
        # A derived peak-memory suite was no execution of its own: its parent's row says how that went.
        if not is_memory_suite(suite.name):
            session.add(SuiteExecution(
                run_id=run_id, name=suite.name, kind=suite.kind, status=suite.status,
                reason=suite.reason, exit_code=suite.exit_code, duration_s=suite.duration_s,
                output_tail=suite.output_tail, environment=suite.environment, suite_files=suite.suite_files,
                order=stored_order(suite.order_seed, suite.order) if suite.kind == "benchmark" else {},
            ))
            if suite.status != "passed":
                excerpts.append(f"== {suite.name}: {suite.reason}\n{suite.output_tail[-2000:]}")
        outcomes += [{"run_id": run_id, "suite": suite.name, **outcome.model_dump()} for outcome in suite.outcomes]
        timed = [record for record in suite.measurements if _timing(record.median) and _timing(record.min)]
        if len(timed) < len(suite.measurements):
            # A worker of another version may send what today's parser refuses; it is no measurement.
            excerpts.append(f"== {suite.name}: {len(suite.measurements) - len(timed)} measurement(s) "
                            "without a positive, finite median were not stored")
        records += [(suite.name, record) for record in timed]

    # Rows go in as multi-row INSERTs: a suite can report tens of thousands of measurements,
    # and one ORM round trip per row would make ingest the slowest step of a run.
    if outcomes:
        session.execute(insert(TestOutcome), outcomes)
    compiled_artifacts.store(session, run_id, envelope.suites)
    ids = benchmark_ids(session, repository, device, records)
    peaks = peaks_for(device)
    rows: list[dict[str, object]] = []
    for (_, record), benchmark_id in zip(records, ids, strict=True):
        row, harness_error = _measurement(run_id, benchmark_id, peaks, record)
        rows.append(row)
        if harness_error:
            excerpts.append(f"== harness error in {record.name}: {harness_error}")
    if rows:
        _insert_measurements(session, rows)
        latest.record(session, run, rows)

    run.state = RunState(envelope.status)
    run.error = envelope.reason
    if run.state in MEASURED_STATES:  # runs whose measurements are read into a history
        run.analysis_state = AnalysisState.PENDING  # until main_branch.after_run has read it into history
    run.suites_source = envelope.suites_source
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
    commit.position = commit.position if commit.position is not None else envelope.commit.position
    session.add(commit)


def upsert_benchmark(session: Session, repository: Repository, suite: str, device: Device,
                      record: MeasurementRecord) -> Benchmark:
    benchmark = session.get(Benchmark, benchmark_ids(session, repository, device, [(suite, record)])[0])
    assert benchmark is not None
    return benchmark


def benchmark_ids(session: Session, repository: Repository, device: Device,
                  records: list[tuple[str, MeasurementRecord]]) -> list[int]:
    """The benchmark id of each (suite, record), creating the new series; one lookup per 500 records.

    Only ids and the declared work are read back (not whole rows): a large suite's lookup
    stays a few index scans instead of thousands of ORM objects.
    """
    keys = [benchmark_fingerprint(repository.full_name, suite, record.name, record.params, record.dtype,
                                  device.device_class) for suite, record in records]
    known: dict[str, tuple[int, float | None, float | None]] = {}
    unique = list(dict.fromkeys(keys))
    postgres = session.get_bind().dialect.name == "postgresql"
    batch = len(unique) or 1 if postgres else LOOKUP_BATCH
    for start in range(0, len(unique), batch):
        chunk = unique[start:start + batch]
        # PostgreSQL takes the whole list as one array parameter; an IN list of thousands of
        # placeholders costs more to build and parse than the lookup itself.
        match = (col(Benchmark.fingerprint) == any_(bindparam("fingerprints", chunk, type_=ARRAY(String)))
                 if postgres else col(Benchmark.fingerprint).in_(chunk))
        rows = session.exec(select(Benchmark.fingerprint, Benchmark.id, Benchmark.flops, Benchmark.bytes).where(match))
        known |= {fingerprint: (id_, flops, bytes_) for fingerprint, id_, flops, bytes_ in rows if id_ is not None}
    created: dict[str, Benchmark] = {}
    changed: dict[int, dict[str, object]] = {}
    for key, (suite, record) in zip(keys, records, strict=True):
        if key in known:
            id_, flops, bytes_ = known[key]
            # The declared work may be corrected in a later commit; the newest declaration wins.
            new_flops = record.flops if record.flops is not None else flops
            new_bytes = record.bytes if record.bytes is not None else bytes_
            if (new_flops, new_bytes) != (flops, bytes_):
                changed[id_] = {"b_id": id_, "flops": new_flops, "bytes": new_bytes}
        elif key not in created:
            created[key] = Benchmark(
                fingerprint=key, repository_id=repository.id, suite=suite, name=record.name,  # type: ignore[arg-type]
                params=record.params, dtype=record.dtype, shape=record.shape,
                impl=str(record.extra_info.get("impl") or ""), device_class=device.device_class,
                flops=record.flops, bytes=record.bytes, unit=record.unit,
            )
    if created:
        session.add_all(created.values())
        session.flush()
        known |= {key: (b.id, b.flops, b.bytes) for key, b in created.items() if b.id is not None}
    if changed:
        table = Benchmark.__table__  # type: ignore[attr-defined]
        session.execute(sa_update(table).where(table.c.id == bindparam("b_id")).values(
            flops=bindparam("flops"), bytes=bindparam("bytes")), list(changed.values()))
    return [known[key][0] for key in keys]


ORDER_STORED = 5000  # node ids of one process's order kept


def stored_order(seed: int | None, order: list[str]) -> dict[str, Any]:
    """A process's benchmark order as stored: its seed and the node ids in the order run (bounded)."""
    if seed is None and not order:
        return {}
    return {"seed": seed, "order": order[:ORDER_STORED], **({"more": len(order) - ORDER_STORED}
                                                            if len(order) > ORDER_STORED else {})}


def _measurement(run_id: int, benchmark_id: int, peaks: Peaks | None,
                 record: MeasurementRecord) -> tuple[dict[str, object], str]:
    """The row (as INSERT values) for one benchmark result, and a harness error message ('' when sane)."""
    median = record.median
    achieved_flops = record.flops / median if record.flops and median > 0 else None
    achieved_bw = record.bytes / median if record.bytes and median > 0 else None
    fraction, harness_error = None, ""
    if peaks is not None and record.flops is not None and record.bytes and median > 0:
        try:
            fraction = fraction_of_roofline(peaks, record.flops, record.bytes, median, record.dtype)
        except RooflineError as exc:
            # Faster than the hardware allows: the declared work or the timer is wrong.
            # Store no fraction rather than a flattering one, and say so in the run's log.
            harness_error = str(exc)
    # Stored raw samples are bounded whatever sent them (a worker cuts them already; an upload
    # or an older worker may not): a run adds kilobytes per benchmark, not megabytes.
    samples = reservoir(record.samples, seed=seed_for(record.name))
    # Population standard deviation in floats (statistics.pstdev computes in exact fractions,
    # which made it the slowest step of ingesting a large suite); over all rounds when the
    # samples are a reservoir of them.
    cut = record.n > len(samples) and record.stddev > 0
    spread = record.stddev if cut else float(np.std(samples)) if len(samples) > 1 else record.stddev
    row: dict[str, object] = {
        "run_id": run_id, "benchmark_id": benchmark_id, "samples": samples, "median": median,
        "iqr": record.iqr, "min": record.min, "mean": record.mean, "n": record.n,
        "cv": spread / record.mean if record.mean > 0 else 0.0,
        "clock_mhz": _number(record.extra_info.get("sm_clock_mhz")),
        "achieved_flops": achieved_flops, "achieved_bandwidth": achieved_bw, "roofline_fraction": fraction,
        "ran": record.ran,
    }
    return row, harness_error


MEASUREMENT_COLUMNS = ("run_id", "benchmark_id", "samples", "median", "iqr", "min", "mean", "n", "cv",
                       "clock_mhz", "achieved_flops", "achieved_bandwidth", "roofline_fraction", "ran")
JSON_COLUMNS = ("samples", "ran")


def _insert_measurements(session: Session, rows: list[dict[str, object]]) -> None:
    """Store measurement rows: COPY on PostgreSQL (several times faster than multi-row INSERTs), INSERT elsewhere."""
    if session.get_bind().dialect.name != "postgresql":
        session.execute(insert(Measurement), rows)
        return
    from psycopg import sql

    cursor = session.connection().connection.driver_connection.cursor()  # type: ignore[union-attr]
    statement = sql.SQL("COPY measurement ({}) FROM STDIN").format(
        sql.SQL(", ").join(map(sql.Identifier, MEASUREMENT_COLUMNS)))
    with cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row([json.dumps(row[c]) if c in JSON_COLUMNS else row[c] for c in MEASUREMENT_COLUMNS])


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value) if abs(value) < 1e308 else math.inf
    return number if math.isfinite(number) else None


def _timing(value: float) -> bool:
    return math.isfinite(value) and value > 0
