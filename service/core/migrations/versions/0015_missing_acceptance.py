"""missingacceptance: a maintainer's word that a benchmark of the base may be missing on a pull request's head

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28 04:01:11
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('missingacceptance',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('repository_id', sa.Integer(), nullable=False),
    sa.Column('pr_number', sa.BigInteger(), nullable=True),
    sa.Column('comparison_id', sa.Integer(), nullable=True),
    sa.Column('benchmark', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('accepted_by', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('via', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('accepted_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['comparison_id'], ['comparison.id'], ),
    sa.ForeignKeyConstraint(['repository_id'], ['repository.id'], ),
    sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('missingacceptance', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_missingacceptance_comparison_id'), ['comparison_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_missingacceptance_repository_id'), ['repository_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('missingacceptance', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_missingacceptance_repository_id'))
        batch_op.drop_index(batch_op.f('ix_missingacceptance_comparison_id'))
    op.drop_table('missingacceptance')
