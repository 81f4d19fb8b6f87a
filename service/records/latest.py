"""Each series' newest branch measurement (``LatestMeasurement``), kept current as runs are stored.

Ingest calls :func:`record` with the rows it has just written; a row replaces the stored one only
when its run is newer, so envelopes arriving out of order (two GPUs, a retried ingest) leave the
newest run in place. Runs that do not measure the branch head are ignored
(``LATEST_EXCLUDED_TRIGGERS``, and runs of commits off the branch).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import and_, delete, func
from sqlalchemy import select as sa_select
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, col

from roofwatch.common.vocabulary import LATEST_EXCLUDED_TRIGGERS
from roofwatch.service.core.models import LatestMeasurement, Measurement, Run
from roofwatch.service.records.runs import latest_runs

COLUMNS = ("benchmark_id", "run_id", "median", "iqr", "n", "achieved_flops", "achieved_bandwidth",
           "roofline_fraction")


def speaks_for_branch(run: Run) -> bool:
    return run.trigger not in LATEST_EXCLUDED_TRIGGERS and not run.branch


def record(session: Session, run: Run, rows: Sequence[Mapping[str, Any]]) -> None:
    """Upsert ``rows`` (measurement columns, ``run_id`` and ``benchmark_id`` included) where newer."""
    if not rows or not speaks_for_branch(run):
        return
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    table = LatestMeasurement.__table__  # type: ignore[attr-defined]
    statement = insert(table)
    statement = statement.on_conflict_do_update(
        index_elements=[table.c.benchmark_id],
        set_={c: statement.excluded[c] for c in COLUMNS if c != "benchmark_id"},
        where=table.c.run_id < statement.excluded.run_id,
    )
    session.execute(statement, [{c: row.get(c) for c in COLUMNS} for row in rows])


def rebuild(session: Session) -> int:
    """Recompute every row from ``measurement`` (what migration 0012 backfilled); the rows written.

    For data written around ingest — a restore, a bulk load, test fixtures that add measurements
    through the ORM. One pass over ``measurement``: tens of seconds at 20 M rows.
    """
    newest = (sa_select(col(Measurement.benchmark_id).label("benchmark_id"), func.max(col(Measurement.run_id)).label("run_id"))
              .join(Run, col(Run.id) == col(Measurement.run_id))
              .where(latest_runs())
              .group_by(col(Measurement.benchmark_id)).subquery())
    rows = (sa_select(*(getattr(Measurement, c) for c in COLUMNS))
            .join(newest, and_(newest.c.benchmark_id == col(Measurement.benchmark_id),
                               newest.c.run_id == col(Measurement.run_id))))
    table = LatestMeasurement.__table__  # type: ignore[attr-defined]
    session.execute(delete(table))
    session.execute(table.insert().from_select(list(COLUMNS), rows))
    return int(session.execute(sa_select(func.count()).select_from(table)).scalar_one())
