"""history by first-parent position; one lifecycle per change; environment shifts per device

commit.position orders history (committer dates can be equal or go backwards). A change gets
its lifecycle phase, its device (the series' epoch) and its range as positions, so a candidate
that overlaps a known change is recognised as that change. Existing changes were stored only
once confirmed, so they start as ``confirmed``.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('commit', schema=None) as batch_op:
        batch_op.add_column(sa.Column('position', sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f('ix_commit_position'), ['position'], unique=False)
    with op.batch_alter_table('device', schema=None) as batch_op:
        batch_op.add_column(sa.Column('environment_shifts', sa.Integer(), nullable=False, server_default='0'))
    with op.batch_alter_table('change', schema=None) as batch_op:
        batch_op.add_column(sa.Column('phase', sa.String(), nullable=False, server_default='confirmed'))
        batch_op.add_column(sa.Column('device_id', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('range_start_position', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('range_end_position', sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f('ix_change_phase'), ['phase'], unique=False)
        batch_op.create_index(batch_op.f('ix_change_device_id'), ['device_id'], unique=False)
        batch_op.create_foreign_key('fk_change_device_id_device', 'device', ['device_id'], ['id'])


def downgrade() -> None:
    with op.batch_alter_table('change', schema=None) as batch_op:
        batch_op.drop_constraint('fk_change_device_id_device', type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_change_device_id'))
        batch_op.drop_index(batch_op.f('ix_change_phase'))
        batch_op.drop_column('range_end_position')
        batch_op.drop_column('range_start_position')
        batch_op.drop_column('device_id')
        batch_op.drop_column('phase')
    with op.batch_alter_table('device', schema=None) as batch_op:
        batch_op.drop_column('environment_shifts')
    with op.batch_alter_table('commit', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_commit_position'))
        batch_op.drop_column('position')
