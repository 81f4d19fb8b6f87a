"""repository.installation_id: a GitHub id, which fits only a 64-bit integer

Revision ID: 0011
Revises: 0009
Create Date: 2026-11-26 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('repository', schema=None) as batch_op:
        batch_op.alter_column('installation_id', existing_type=sa.Integer(), type_=sa.BigInteger(),
                              existing_nullable=True)


def downgrade() -> None:
    # The older schema cannot hold an id beyond 32 bits: such an installation id is forgotten
    # (NULL, as for a repository never installed) rather than the downgrade failing half-way.
    # roofwatch learns it again from the next installation or webhook event that carries it.
    op.execute(sa.text("UPDATE repository SET installation_id = NULL "
                       "WHERE installation_id > 2147483647 OR installation_id < -2147483648"))
    with op.batch_alter_table('repository', schema=None) as batch_op:
        batch_op.alter_column('installation_id', existing_type=sa.BigInteger(), type_=sa.Integer(),
                              existing_nullable=True)
