"""benchmark.impl: which implementation a series times (the kernel, or a torch baseline)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21 19:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('benchmark', schema=None) as batch_op:
        batch_op.add_column(sa.Column('impl', sqlmodel.sql.sqltypes.AutoString(), nullable=False, server_default=''))


def downgrade() -> None:
    with op.batch_alter_table('benchmark', schema=None) as batch_op:
        batch_op.drop_column('impl')
