"""run.trigger: the nightly run is the vocabulary's "schedule" (it was stored as "nightly", a word no rule
read, so a nightly run was never a point of its branch's history nor its head)

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28 17:45:00
"""

from __future__ import annotations

from alembic import op

revision = '0020'
down_revision = '0019'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("UPDATE run SET \"trigger\" = 'schedule' WHERE \"trigger\" = 'nightly'")


def downgrade() -> None:
    # the nightly flow's runs are the scheduled ones its idempotency key names (core.keys.nightly_run_key)
    op.execute("UPDATE run SET \"trigger\" = 'nightly' WHERE \"trigger\" = 'schedule' AND idempotency_key LIKE '%:nightly:%'")
