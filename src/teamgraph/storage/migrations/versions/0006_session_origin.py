"""sessions remember the dialect that made them and their client's metadata (Agent Protocol
threads: ``origin`` "langgraph", ``metadata``)

Revision ID: session_origin
Revises: rate_limits
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "session_origin"
down_revision = "rate_limits"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("origin", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("meta", sa.JSON(), nullable=True))
    # the threads made before: the protocol named them so
    op.execute("UPDATE sessions SET origin = 'langgraph' WHERE name = 'LangGraph thread'")


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("meta")
        batch.drop_column("origin")
