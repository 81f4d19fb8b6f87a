"""GitHub integration: app installations, delivery details, report outbox

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21 18:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('repository', schema=None) as batch_op:
        batch_op.add_column(sa.Column('installation_id', sa.Integer(), nullable=True))
    with op.batch_alter_table('webhookdelivery', schema=None) as batch_op:
        batch_op.add_column(sa.Column('action', sqlmodel.sql.sqltypes.AutoString(), nullable=False, server_default=''))
        batch_op.add_column(sa.Column('repository', sqlmodel.sql.sqltypes.AutoString(), nullable=False,
                                      server_default=''))
        batch_op.add_column(sa.Column('detail', sqlmodel.sql.sqltypes.AutoString(), nullable=False, server_default=''))

    op.create_table('githubreport',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('repository_id', sa.Integer(), nullable=False),
    sa.Column('target', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('subject', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('delivered_version', sa.Integer(), nullable=False),
    sa.Column('external_id', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('last_error', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('next_attempt_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('updated_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['repository_id'], ['repository.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('repository_id', 'target', 'subject'),
    )
    with op.batch_alter_table('githubreport', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_githubreport_repository_id'), ['repository_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_githubreport_next_attempt_at'), ['next_attempt_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('githubreport', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_githubreport_next_attempt_at'))
        batch_op.drop_index(batch_op.f('ix_githubreport_repository_id'))
    op.drop_table('githubreport')
    with op.batch_alter_table('webhookdelivery', schema=None) as batch_op:
        batch_op.drop_column('detail')
        batch_op.drop_column('repository')
        batch_op.drop_column('action')
    with op.batch_alter_table('repository', schema=None) as batch_op:
        batch_op.drop_column('installation_id')
