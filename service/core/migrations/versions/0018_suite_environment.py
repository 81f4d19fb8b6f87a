"""suiteexecution.environment: the commit's own environment a suite ran in (digest, python, packages)

Revision ID: 0018
Revises: 0016
Create Date: 2026-11-28 06:23:11
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0018'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('suiteexecution', schema=None) as batch_op:
        batch_op.add_column(sa.Column('environment', sa.JSON(), server_default='{}', nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('suiteexecution', schema=None) as batch_op:
        batch_op.drop_column('environment')
