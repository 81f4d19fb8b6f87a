"""repository.suite_network (the operator's network switch for suites) and pullrequesthead (heads seen, for approvals)

A suite has no network unless its repository's operator turns it on. An approval covers
the head that was current when it was given: every head roofwatch was told about, and when,
is kept so a `/roofwatch run` comment can be matched to the head it was written for.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24 09:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('repository', schema=None) as batch_op:
        batch_op.add_column(sa.Column('suite_network', sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_table(
        'pullrequesthead',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('repository_id', sa.Integer(), nullable=False),
        sa.Column('number', sa.BigInteger(), nullable=False),
        sa.Column('sha', sa.String(length=64), nullable=False),
        sa.Column('seen_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['repository_id'], ['repository.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('repository_id', 'number', 'sha'),
    )
    op.create_index('ix_pullrequesthead_repository_number', 'pullrequesthead', ['repository_id', 'number'])


def downgrade() -> None:
    op.drop_index('ix_pullrequesthead_repository_number', table_name='pullrequesthead')
    op.drop_table('pullrequesthead')
    with op.batch_alter_table('repository', schema=None) as batch_op:
        batch_op.drop_column('suite_network')
