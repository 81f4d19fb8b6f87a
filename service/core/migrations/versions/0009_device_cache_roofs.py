"""device.cache_roofs: measured cache-level roofs (capacity and bandwidth per level) for the hierarchical roofline

Revision ID: 0009
Revises: 0010
Create Date: 2026-11-24 09:05:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('device', schema=None) as batch_op:
        batch_op.add_column(sa.Column('cache_roofs', sa.JSON(), nullable=False, server_default='{}'))


def downgrade() -> None:
    with op.batch_alter_table('device', schema=None) as batch_op:
        batch_op.drop_column('cache_roofs')
