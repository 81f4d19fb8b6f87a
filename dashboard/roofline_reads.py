"""What the roofline page reads: a device's roofs, its runs, and each benchmark's newest measurement.

Sized for a thousand benchmarks times thousands of commits: the points come from one query
(the highest run id per benchmark, joined back to its measurement), never a query per
benchmark, and only the columns the chart needs are read (``Measurement.samples`` can be large).

Runs triggered by pull requests and bisection are left out everywhere here, and so are runs of
commits off the default branch: a pull request's head or a branch is not the branch, and
bisection re-measures old commits under new run ids, so any would pass for "the latest" when it
is not.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import ColumnElement, and_, exists, func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import Select, SelectOfScalar

from roofwatch.dashboard.filters import Filters
from roofwatch.dashboard.roofline_chart import KernelPoint
from roofwatch.roofline import Peaks
from roofwatch.service.core.models import Benchmark, Commit, Device, LatestMeasurement, Measurement, Repository, Run
from roofwatch.service.records.roofline import peaks_for
from roofwatch.service.records.runs import latest_runs

# Longest run id taken as an id rather than a SHA prefix; keeps huge digit strings off the database.
MAX_RUN_ID_DIGITS = 15
MIN_SHA_PREFIX = 4


class AgainstError(LookupError):
    """``against`` names no run or commit on this device (``status`` 404) or several (422)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class RunRef:
    id: int
    sha: str
    title: str


@dataclass(frozen=True)
class Roofs:
    """The roofs drawn for a device class, and where they came from."""

    peaks: Peaks | None
    source: str  # "measured" | "datasheet" | "none"
    device: Device | None


def default_device(session: Session, repo: str = "") -> str | None:
    """The device class of the newest run that stored measurements."""
    query = (select(Device.device_class).join(Run, col(Run.device_id) == col(Device.id))
             .where(exists().where(col(Measurement.run_id) == col(Run.id)), latest_runs()))
    if repo:
        query = query.where(col(Run.repository_id).in_(select(Repository.id).where(Repository.full_name == repo)))
    return session.exec(query.order_by(col(Run.id).desc()).limit(1)).first()


def roofs(session: Session, device_class: str) -> Roofs:
    """Measured roofs from the newest calibrated device of the class, else datasheet ones, else none.

    Devices of one class differ only in software and host (that is what makes their fingerprints
    differ), so any calibration of the class describes the same silicon.
    """
    devices = list(session.exec(select(Device).where(Device.device_class == device_class)
                                .order_by(col(Device.id).desc())).all())
    if not devices:
        return Roofs(None, "none", None)
    calibrated = [d for d in devices if d.peak_bandwidth and d.peak_flops]
    device = (calibrated or devices)[0]
    peaks = peaks_for(device)
    if peaks is None:
        return Roofs(None, "none", device)
    # A device row may carry stored datasheet figures; it says so in peaks_source.
    source = "datasheet" if peaks.source == "datasheet" or device.peaks_source == "datasheet" else peaks.source
    return Roofs(peaks, source, device)


def _branch_runs_on(device_class: str, repo: str) -> list[ColumnElement[bool]]:
    """Conditions on ``Run``: branch runs on ``device_class`` (in ``repo``) that stored measurements."""
    conditions = [col(Run.device_id).in_(select(Device.id).where(Device.device_class == device_class)),
                  latest_runs(), exists().where(col(Measurement.run_id) == col(Run.id))]
    if repo:
        conditions.append(col(Run.repository_id).in_(select(Repository.id).where(Repository.full_name == repo)))
    return conditions


def _ref(row: tuple[int | None, str, str] | None) -> RunRef | None:
    if row is None or row[0] is None:
        return None
    return RunRef(row[0], row[1], row[2].splitlines()[0] if row[2] else "")


def _run_refs() -> Select[int | None, str, str]:
    return select(Run.id, Commit.sha, Commit.message).join(Commit, col(Run.commit_id) == col(Commit.id))


def runs_back(session: Session, device_class: str, repo: str, back: int) -> tuple[RunRef | None, RunRef | None]:
    """The newest run on the device and the one ``back`` runs before it (the oldest if fewer)."""
    newest_first = _run_refs().where(*_branch_runs_on(device_class, repo)).order_by(col(Run.id).desc())
    latest = _ref(session.exec(newest_first.limit(1)).first())
    if latest is None:
        return None, None
    earlier = _ref(session.exec(newest_first.offset(back).limit(1)).first())
    if earlier is None:
        earlier = _ref(session.exec(_run_refs().where(*_branch_runs_on(device_class, repo)).order_by(col(Run.id))
                                    .limit(1)).first())
    return latest, (earlier if earlier is not None and earlier.id != latest.id else None)


def resolve_against(session: Session, device_class: str, repo: str, against: str) -> RunRef:
    """A run id, or a commit SHA prefix (its newest run on the device); ``AgainstError`` otherwise."""
    scoped = _run_refs().where(*_branch_runs_on(device_class, repo))
    if against.isdigit() and len(against) <= MAX_RUN_ID_DIGITS:
        found = _ref(session.exec(scoped.where(Run.id == int(against))).first())
        if found is not None:
            return found
    prefix = against.lower()
    if len(prefix) < MIN_SHA_PREFIX:
        raise AgainstError(f"no run {against} on {device_class}; a SHA prefix needs {MIN_SHA_PREFIX}+ digits", 404)
    commits = (select(Commit.sha).join(Run, col(Run.commit_id) == col(Commit.id))
               .where(*_branch_runs_on(device_class, repo)))
    shas = session.exec(commits.where(col(Commit.sha).startswith(prefix, autoescape=True)).distinct().limit(2)).all()
    if not shas:
        raise AgainstError(f"no run or measured commit {against!r} on {device_class}", 404)
    if len(shas) > 1:
        raise AgainstError(f"{against!r} matches several commits ({', '.join(s[:12] for s in shas)}, …)", 422)
    found = _ref(session.exec(scoped.where(Commit.sha == shas[0]).order_by(col(Run.id).desc()).limit(1)).first())
    assert found is not None  # the SHA came from this very scope
    return found


def _plottable(filters: Filters) -> SelectOfScalar[Any]:
    """Ids of the filtered benchmarks that declare their work: a roofline needs FLOPs and bytes."""
    return filters.apply(select(Benchmark.id)).where(col(Benchmark.flops) > 0, col(Benchmark.bytes) > 0)


def latest_points(session: Session, filters: Filters, device_class: str, upto: int | None = None) -> list[KernelPoint]:
    """Each filtered benchmark's newest measurement on ``device_class`` (in runs up to ``upto``).

    The newest points come from ``latestmeasurement``, kept at ingest: a read as long as the list
    of benchmarks, whatever the length of history. An earlier run's points (``upto``, a branch
    run) are first that run's own measurements — one run's rows, stored together — and only the
    benchmarks it did not measure take a correlated ``ORDER BY run_id DESC LIMIT 1`` each: over
    the (benchmark_id, run_id) index a short backward scan from ``upto``, where ``max()`` per
    group reads every measurement ever stored. Excluded runs are a (small) id list to skip, not a
    join, so that scan stops at the first hit.
    """
    if upto is None:
        return _newest_points(session, filters, device_class)
    plottable = _plottable(replace(filters, device=device_class))
    at_run = session.execute(
        sa_select(col(Benchmark.id), col(Benchmark.name), col(Benchmark.shape), col(Benchmark.dtype),
                  col(Benchmark.impl), col(Benchmark.flops), col(Benchmark.bytes), col(Measurement.median),
                  col(Measurement.run_id), col(Commit.sha), col(Measurement.roofline_fraction))
        .select_from(Measurement)
        .join(Benchmark, col(Benchmark.id) == col(Measurement.benchmark_id))
        .join(Run, col(Run.id) == col(Measurement.run_id))
        .join(Commit, col(Commit.id) == col(Run.commit_id))
        .where(col(Measurement.run_id) == upto, col(Benchmark.id).in_(plottable))).all()
    points = [KernelPoint(*row) for row in at_run if row.median > 0]
    measured_there = col(Benchmark.id).in_(sa_select(col(Measurement.benchmark_id)).where(col(Measurement.run_id) == upto))
    skipped = select(Run.id).where(~latest_runs())
    newest = (sa_select(col(Measurement.run_id))
              .where(col(Measurement.benchmark_id) == col(Benchmark.id), col(Measurement.run_id).not_in(skipped)))
    newest = newest.where(col(Measurement.run_id) <= upto)
    newest_run = newest.order_by(col(Measurement.run_id).desc()).limit(1).correlate(Benchmark).scalar_subquery()
    query = (sa_select(col(Benchmark.id), col(Benchmark.name), col(Benchmark.shape), col(Benchmark.dtype),
                       col(Benchmark.impl), col(Benchmark.flops), col(Benchmark.bytes), col(Measurement.median),
                       col(Measurement.run_id), col(Commit.sha), col(Measurement.roofline_fraction))
             .select_from(Benchmark)
             .join(Measurement, and_(col(Measurement.benchmark_id) == col(Benchmark.id),
                                     col(Measurement.run_id) == newest_run))
             .join(Run, col(Run.id) == col(Measurement.run_id))
             .join(Commit, col(Commit.id) == col(Run.commit_id))
             .where(col(Benchmark.id).in_(plottable), ~measured_there, col(Measurement.median) > 0))
    points += [KernelPoint(*row) for row in session.execute(query).all()]
    return sorted(points, key=lambda p: p.benchmark_id)


def _newest_points(session: Session, filters: Filters, device_class: str) -> list[KernelPoint]:
    query = (sa_select(col(Benchmark.id), col(Benchmark.name), col(Benchmark.shape), col(Benchmark.dtype),
                       col(Benchmark.impl), col(Benchmark.flops), col(Benchmark.bytes), col(LatestMeasurement.median),
                       col(LatestMeasurement.run_id), col(Commit.sha), col(LatestMeasurement.roofline_fraction))
             .select_from(Benchmark)
             .join(LatestMeasurement, col(LatestMeasurement.benchmark_id) == col(Benchmark.id))
             .join(Run, col(Run.id) == col(LatestMeasurement.run_id))
             .join(Commit, col(Commit.id) == col(Run.commit_id))
             .where(col(Benchmark.id).in_(_plottable(replace(filters, device=device_class))),
                    col(LatestMeasurement.median) > 0)
             .order_by(col(Benchmark.id)))
    return [KernelPoint(*row) for row in session.execute(query).all()]


def unplottable(session: Session, filters: Filters, device_class: str) -> int:
    """How many filtered benchmarks on the device declare no FLOPs or no bytes, so have no point."""
    scoped = replace(filters, device=device_class)
    query = scoped.apply(select(func.count()).select_from(Benchmark))
    query = query.where(col(Benchmark.id).not_in(_plottable(scoped)))
    return int(session.exec(query).one())
