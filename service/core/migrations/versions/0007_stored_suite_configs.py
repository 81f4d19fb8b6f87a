"""suiteconfig: suites kept outside the repository (every version); run.suites_source: which suites ran and why

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24 09:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'suiteconfig',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('repository_id', sa.Integer(), nullable=False),
        sa.Column('version', sa.Integer(), nullable=False),
        sa.Column('content', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('origin', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['repository_id'], ['repository.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('repository_id', 'version'),
    )
    op.create_index(op.f('ix_suiteconfig_repository_id'), 'suiteconfig', ['repository_id'], unique=False)
    with op.batch_alter_table('run', schema=None) as batch_op:
        batch_op.add_column(sa.Column('suites_source', sqlmodel.sql.sqltypes.AutoString(), nullable=False,
                                      server_default=''))


def downgrade() -> None:
    with op.batch_alter_table('run', schema=None) as batch_op:
        batch_op.drop_column('suites_source')
    op.drop_index(op.f('ix_suiteconfig_repository_id'), table_name='suiteconfig')
    op.drop_table('suiteconfig')
