"""run.analysis_state / run.analysis_error: an analysis that failed or never finished is shown

Revision ID: 0013
Revises: 0012_latest_measurement
Create Date: 2026-11-27 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0013'
down_revision = '0012_latest_measurement'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('run', schema=None) as batch_op:
        batch_op.add_column(sa.Column('analysis_state', sa.String(), nullable=False, server_default=''))
        batch_op.add_column(sa.Column('analysis_error', sa.String(), nullable=False, server_default=''))


def downgrade() -> None:
    with op.batch_alter_table('run', schema=None) as batch_op:
        batch_op.drop_column('analysis_error')
        batch_op.drop_column('analysis_state')
