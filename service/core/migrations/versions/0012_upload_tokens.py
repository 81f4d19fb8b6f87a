"""uploadtoken: per-repository tokens that may upload results and nothing else

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26 23:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'uploadtoken',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('repository_id', sa.Integer(), nullable=False),
        sa.Column('token_sha256', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('label', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('revoked_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(['repository_id'], ['repository.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index(op.f('ix_uploadtoken_repository_id'), 'uploadtoken', ['repository_id'], unique=False)
    op.create_index(op.f('ix_uploadtoken_token_sha256'), 'uploadtoken', ['token_sha256'], unique=True)


def downgrade() -> None:
    op.drop_index(op.f('ix_uploadtoken_token_sha256'), table_name='uploadtoken')
    op.drop_index(op.f('ix_uploadtoken_repository_id'), table_name='uploadtoken')
    op.drop_table('uploadtoken')
