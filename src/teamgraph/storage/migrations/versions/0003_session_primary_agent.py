"""sessions remember the agent a direct chat talks to (seed-004's primaryAgentId)

Revision ID: session_primary_agent
Revises: run_leases
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "session_primary_agent"
down_revision = "run_leases"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("primary_agent", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("primary_agent")
