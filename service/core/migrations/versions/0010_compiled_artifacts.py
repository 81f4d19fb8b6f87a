"""compiledartifact: Triton kernels compiled for target GPUs, per run

Revision ID: 0010
Revises: 0008
Create Date: 2026-11-24 08:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0010'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    text = sqlmodel.sql.sqltypes.AutoString()
    op.create_table(
        'compiledartifact',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('run_id', sa.Integer(), nullable=False),
        sa.Column('suite', text, nullable=False),
        sa.Column('kernel', text, nullable=False),
        sa.Column('specialization', text, nullable=False),
        sa.Column('target', text, nullable=False),
        sa.Column('status', text, nullable=False),
        sa.Column('reason', text, nullable=False),
        sa.Column('registers', sa.Integer(), nullable=True),
        sa.Column('spill_bytes', sa.Integer(), nullable=True),
        sa.Column('stack_bytes', sa.Integer(), nullable=True),
        sa.Column('shared_bytes', sa.Integer(), nullable=True),
        sa.Column('ptx_bytes', sa.Integer(), nullable=True),
        sa.Column('sass_bytes', sa.Integer(), nullable=True),
        sa.Column('sass_instructions', sa.Integer(), nullable=True),
        sa.Column('instructions', sa.JSON(), nullable=False),
        sa.Column('tests', sa.JSON(), nullable=False),
        sa.Column('sass_hash', text, nullable=False),
        sa.Column('toolchain', text, nullable=False),
        sa.ForeignKeyConstraint(['run_id'], ['run.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('compiledartifact', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_compiledartifact_run_id'), ['run_id'], unique=False)
        batch_op.create_index('ix_compiledartifact_run_kernel', ['run_id', 'kernel'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('compiledartifact', schema=None) as batch_op:
        batch_op.drop_index('ix_compiledartifact_run_kernel')
        batch_op.drop_index(batch_op.f('ix_compiledartifact_run_id'))
    op.drop_table('compiledartifact')
