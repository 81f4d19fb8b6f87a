"""testoutcome.beyond_half_ulp: the share of an output's elements beyond half an ulp, tracked for drift

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('testoutcome', schema=None) as batch_op:
        batch_op.add_column(sa.Column('beyond_half_ulp', sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('testoutcome', schema=None) as batch_op:
        batch_op.drop_column('beyond_half_ulp')
