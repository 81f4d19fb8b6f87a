"""measurement.ran, comparisonresult.attribution, suiteexecution.order: what each benchmark ran, why a change
moved it, and the order a run's process ran its benchmarks in

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28 10:02:40
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('measurement', schema=None) as batch_op:
        batch_op.add_column(sa.Column('ran', sa.JSON(), server_default='{}', nullable=False))
    with op.batch_alter_table('comparisonresult', schema=None) as batch_op:
        batch_op.add_column(sa.Column('attribution', sa.JSON(), server_default='{}', nullable=False))
    with op.batch_alter_table('suiteexecution', schema=None) as batch_op:
        batch_op.add_column(sa.Column('order', sa.JSON(), server_default='{}', nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('suiteexecution', schema=None) as batch_op:
        batch_op.drop_column('order')
    with op.batch_alter_table('comparisonresult', schema=None) as batch_op:
        batch_op.drop_column('attribution')
    with op.batch_alter_table('measurement', schema=None) as batch_op:
        batch_op.drop_column('ran')
