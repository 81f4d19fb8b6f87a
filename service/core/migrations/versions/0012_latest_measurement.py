"""latestmeasurement: each series' newest branch measurement, kept at ingest and backfilled here

The roofline and the overview read "where every kernel stands now" from a table one row per
benchmark long, instead of probing ``measurement`` (20 M rows a year on) once per benchmark.

Revision ID: 0012_latest_measurement
Revises: 0011
Create Date: 2026-11-27 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0012_latest_measurement'
down_revision = '0012'
branch_labels = None
depends_on = None

# The newest measurement per benchmark among runs that measure the branch head (pull-request
# heads and bisection re-measurements excluded), as ingest keeps it from now on. Portable SQL:
# one pass over measurement on SQLite and PostgreSQL alike (tens of seconds at 20 M rows).
BACKFILL = """
INSERT INTO latestmeasurement (benchmark_id, run_id, median, iqr, n, achieved_flops, achieved_bandwidth,
                               roofline_fraction)
SELECT m.benchmark_id, m.run_id, m.median, m.iqr, m.n, m.achieved_flops, m.achieved_bandwidth, m.roofline_fraction
FROM measurement m
JOIN (SELECT inner_m.benchmark_id AS benchmark_id, max(inner_m.run_id) AS run_id
      FROM measurement inner_m JOIN run r ON r.id = inner_m.run_id
      WHERE r."trigger" NOT IN ('pull_request', 'bisect')
      GROUP BY inner_m.benchmark_id) newest
  ON newest.benchmark_id = m.benchmark_id AND newest.run_id = m.run_id
"""


def upgrade() -> None:
    op.create_table(
        'latestmeasurement',
        sa.Column('benchmark_id', sa.Integer(), autoincrement=False, nullable=False),
        sa.Column('run_id', sa.Integer(), nullable=False),
        sa.Column('median', sa.Float(), nullable=False),
        sa.Column('iqr', sa.Float(), nullable=False),
        sa.Column('n', sa.Integer(), nullable=False),
        sa.Column('achieved_flops', sa.Float(), nullable=True),
        sa.Column('achieved_bandwidth', sa.Float(), nullable=True),
        sa.Column('roofline_fraction', sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(['benchmark_id'], ['benchmark.id']),
        sa.ForeignKeyConstraint(['run_id'], ['run.id']),
        sa.PrimaryKeyConstraint('benchmark_id'),
    )
    with op.batch_alter_table('latestmeasurement', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_latestmeasurement_run_id'), ['run_id'], unique=False)
    op.execute(sa.text(BACKFILL))


def downgrade() -> None:
    with op.batch_alter_table('latestmeasurement', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_latestmeasurement_run_id'))
    op.drop_table('latestmeasurement')
