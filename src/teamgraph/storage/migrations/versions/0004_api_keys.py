"""API keys per user; sessions remember a stateless client's conversation

Revision ID: api_keys
Revises: session_primary_agent
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "api_keys"
down_revision = "session_primary_agent"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column(
            "user_id",
            sa.String(length=64),
            sa.ForeignKey("users.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_api_keys_user_id", "api_keys", ["user_id"])
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("conversation_key", sa.String(length=64), nullable=True))
        batch.create_index("ix_sessions_conversation_key", ["conversation_key"])


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_index("ix_sessions_conversation_key")
        batch.drop_column("conversation_key")
    op.drop_index("ix_api_keys_user_id", table_name="api_keys")
    op.drop_table("api_keys")
