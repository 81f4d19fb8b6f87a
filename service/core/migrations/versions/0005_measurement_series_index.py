"""measurement: one (benchmark_id, run_id) index carrying the series columns, in place of benchmark_id's

A series read (trend, roofline, series API) on 2 M measurements fetched one heap page per point;
with the plotted columns INCLUDEd (PostgreSQL), it is an index-only scan. The composite index
serves every lookup by benchmark_id, so the single-column one goes.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 19:45:00
"""

from __future__ import annotations

from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None

SERIES_COLUMNS = ['median', 'iqr', 'min', 'n', 'cv', 'achieved_flops', 'achieved_bandwidth', 'roofline_fraction']


def upgrade() -> None:
    with op.batch_alter_table('measurement', schema=None) as batch_op:
        batch_op.create_index('ix_measurement_benchmark_run', ['benchmark_id', 'run_id'], unique=False,
                              postgresql_include=SERIES_COLUMNS)
        batch_op.drop_index(batch_op.f('ix_measurement_benchmark_id'))


def downgrade() -> None:
    with op.batch_alter_table('measurement', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_measurement_benchmark_id'), ['benchmark_id'], unique=False)
        batch_op.drop_index('ix_measurement_benchmark_run')
