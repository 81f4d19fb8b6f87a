"""Stable series for suites whose files come from outside the commit, and runs kept off the default branch

- ``suiteexecution.suite_files``: where a suite's files came from when not from the commit (a
  ``suites_from`` backfill or a ``suites_repo``), with the content digest of those files. Such a
  suite's results used to be stored under ``<name>@<content digest>``, so its history restarted
  whenever the files changed; from now on the suite keeps its own name and a new digest is an
  event on its series. The rows written the old way are renamed here: every benchmark of a suite
  ``<name>@<10 hex digits>`` (and of its ``<name>@<digits>:memory`` peak-memory suite) joins the
  series of ``<name>`` (benchmarks of one name under several digests become one series, their
  measurements, comparison results and changes moved to it), and suite executions, test
  outcomes, changes, compiled artifacts and missing-benchmark acceptances lose the suffix. The
  digest a suite execution's name carried goes into its ``suite_files`` (with the paths and commit
  its recorded reason names), so the events of the history measured before are shown too.
- ``run.branch``: the branch of a run whose commit is not on the default branch's first-parent
  history (``roofwatch run --rev feature``, a push to a branch ``ROOFWATCH_PUSH_BRANCHES`` tracks);
  ``""`` for the default branch's own runs, which every stored run is taken to be.

Downgrading drops both columns; the merged series stay merged (the digests are gone with them).

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28 09:00:00
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None

# What roofwatch named a suite with laid-over files: the suite's name, "@", 10 hex digits of
# the content digest (and ":memory" for its derived peak-memory suite).
CONTENT_NAMED = re.compile(r"^(?P<base>.+)@(?P<digest>[0-9a-f]{10})(?P<memory>:memory)?$")
# The note such a suite's reason carried: "suite files bench/, x/ from <origin>, content <digest>",
# the origin being "<sha>", "<ref> (<sha>)", or either after "<suites_repo> at ".
NOTE = re.compile(r"suite files (?P<paths>.+?) from (?P<origin>.+?), content (?P<digest>[0-9a-f]{10})")
ORIGIN = re.compile(r"^(?:(?P<repository>.+) at )?(?:(?P<ref>.+) \((?P<sha>[0-9a-f]{40})\)|(?P<bare>[0-9a-f]{40}))$")
# Runs whose measurements never speak for the branch's newest state (as in 0012).
LATEST_EXCLUDED = ('pull_request', 'bisect')


def fingerprint(repository: str, suite: str, name: str, params: str, dtype: str, device_class: str) -> str:
    """``roofwatch.service.core.fingerprint.benchmark_fingerprint`` as of this revision."""
    key = "\x1f".join([repository, suite, name, params, dtype, device_class])
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def plain(name: str) -> str:
    """``name`` without a content digest: ``bench@0123456789:memory`` → ``bench:memory``."""
    match = CONTENT_NAMED.match(name)
    return f"{match['base']}{match['memory'] or ''}" if match else name


def files_record(digest: str, reason: str) -> dict[str, Any]:
    """``suite_files`` of an execution stored the old way: the digest, and what its reason says of the files."""
    record: dict[str, Any] = {"digest": digest}
    note = NOTE.search(reason or "")
    if note is None or note['digest'] != digest:
        return record
    record["paths"] = [path.strip() for path in note['paths'].split(",") if path.strip()]
    origin = ORIGIN.match(note['origin'])
    if origin is not None:
        record |= {"repository": origin['repository'] or "", "ref": origin['ref'] or "",
                   "commit": origin['sha'] or origin['bare']}
    return record


def upgrade() -> None:
    with op.batch_alter_table('run', schema=None) as batch_op:
        batch_op.add_column(sa.Column('branch', sqlmodel.sql.sqltypes.AutoString(), server_default='', nullable=False))
    with op.batch_alter_table('suiteexecution', schema=None) as batch_op:
        batch_op.add_column(sa.Column('suite_files', sa.JSON(), server_default='{}', nullable=False))
    bind = op.get_bind()
    _suite_executions(bind)
    _named_rows(bind)
    _benchmarks(bind)


def _suite_executions(bind: sa.Connection) -> None:
    rows = bind.execute(sa.text("SELECT id, name, reason FROM suiteexecution WHERE name LIKE '%@%'")).all()
    for id_, name, reason in rows:
        match = CONTENT_NAMED.match(name)
        if match is None or match['memory']:
            continue
        update = sa.text("UPDATE suiteexecution SET name = :name, suite_files = :files WHERE id = :id").bindparams(
            sa.bindparam("files", type_=sa.JSON))
        bind.execute(update, {"name": match['base'], "files": files_record(match['digest'], reason), "id": id_})


def _named_rows(bind: sa.Connection) -> None:
    """Suite names elsewhere: test outcomes, changes, compiled artifacts, and ``suite::name`` acceptances."""
    for table in ("testoutcome", "change", "compiledartifact"):
        names = bind.execute(sa.text(f"SELECT DISTINCT suite FROM \"{table}\" WHERE suite LIKE '%@%'")).scalars().all()
        for name in names:
            if plain(name) != name:
                bind.execute(sa.text(f'UPDATE "{table}" SET suite = :new WHERE suite = :old'),
                             {"new": plain(name), "old": name})
    rows = bind.execute(sa.text("SELECT id, benchmark FROM missingacceptance WHERE benchmark LIKE '%@%::%'")).all()
    for id_, benchmark in rows:
        suite, _, name = benchmark.partition("::")
        if plain(suite) != suite:
            bind.execute(sa.text("UPDATE missingacceptance SET benchmark = :benchmark WHERE id = :id"),
                         {"benchmark": f"{plain(suite)}::{name}", "id": id_})


def _benchmarks(bind: sa.Connection) -> None:
    """Rename each content-named series to its suite's own name, merging those that meet there.

    In id order, so the oldest series of a name is the one the others join.
    """
    rows = bind.execute(sa.text(
        "SELECT b.id, b.fingerprint, b.suite, b.name, b.params, b.dtype, b.device_class, r.full_name "
        "FROM benchmark b JOIN repository r ON r.id = b.repository_id ORDER BY b.id")).all()
    by_fingerprint = {row.fingerprint: row.id for row in rows}
    merged: set[int] = set()
    for row in rows:
        suite = plain(row.suite)
        if suite == row.suite:
            continue
        key = fingerprint(row.full_name, suite, row.name, row.params, row.dtype, row.device_class)
        target = by_fingerprint.get(key)
        if target is None:
            bind.execute(sa.text("UPDATE benchmark SET suite = :suite, fingerprint = :key WHERE id = :id"),
                         {"suite": suite, "key": key, "id": row.id})
            by_fingerprint[key] = row.id
            continue
        _merge(bind, row.id, target)
        merged.add(target)
    for target in sorted(merged):
        _latest(bind, target)


def _merge(bind: sa.Connection, old: int, target: int) -> None:
    """Move everything of series ``old`` to ``target``, then delete ``old``.

    One run measures a suite once, with one set of files, so a run (or a comparison) holds at
    most one of the two; a row that would still collide is dropped rather than fail the upgrade.
    """
    ids = {"old": old, "target": target}
    for table, owner in (("measurement", "run_id"), ("comparisonresult", "comparison_id")):
        bind.execute(sa.text(f"DELETE FROM {table} WHERE benchmark_id = :old AND {owner} IN "
                             f"(SELECT {owner} FROM {table} WHERE benchmark_id = :target)"), ids)
        bind.execute(sa.text(f"UPDATE {table} SET benchmark_id = :target WHERE benchmark_id = :old"), ids)
    bind.execute(sa.text('UPDATE "change" SET benchmark_id = :target WHERE benchmark_id = :old'), ids)
    # The declared work: the newer series' where it declares any.
    bind.execute(sa.text(
        "UPDATE benchmark SET flops = COALESCE((SELECT flops FROM benchmark WHERE id = :old), flops), "
        "bytes = COALESCE((SELECT bytes FROM benchmark WHERE id = :old), bytes) WHERE id = :target"), ids)
    bind.execute(sa.text("DELETE FROM latestmeasurement WHERE benchmark_id IN (:old, :target)"), ids)
    bind.execute(sa.text("DELETE FROM benchmark WHERE id = :old"), ids)


def _latest(bind: sa.Connection, benchmark_id: int) -> None:
    """The merged series' newest branch measurement, as 0012 filled it."""
    excluded = ", ".join(f"'{trigger}'" for trigger in LATEST_EXCLUDED)
    bind.execute(sa.text(f"""
        INSERT INTO latestmeasurement (benchmark_id, run_id, median, iqr, n, achieved_flops, achieved_bandwidth,
                                       roofline_fraction)
        SELECT m.benchmark_id, m.run_id, m.median, m.iqr, m.n, m.achieved_flops, m.achieved_bandwidth,
               m.roofline_fraction
        FROM measurement m
        WHERE m.benchmark_id = :id AND m.run_id = (
            SELECT max(inner_m.run_id) FROM measurement inner_m JOIN run r ON r.id = inner_m.run_id
            WHERE inner_m.benchmark_id = :id AND r."trigger" NOT IN ({excluded}))
    """), {"id": benchmark_id})


def downgrade() -> None:
    with op.batch_alter_table('suiteexecution', schema=None) as batch_op:
        batch_op.drop_column('suite_files')
    with op.batch_alter_table('run', schema=None) as batch_op:
        batch_op.drop_column('branch')
