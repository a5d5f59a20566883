"""Rates shared by every process on the database (provider limits across workers)

Revision ID: rate_limits
Revises: api_keys
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "rate_limits"
down_revision = "api_keys"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rate_limits",
        sa.Column("key", sa.String(length=200), primary_key=True),
        sa.Column("tat", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("rate_limits")
