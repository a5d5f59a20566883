"""Indexes retention deletes by: a run's messages and turn results; on PostgreSQL, a run's
nested teams' threads (``{thread_id}/…``) in LangGraph's checkpoints (``LIKE 'prefix%'`` under
any collation)

Revision ID: checkpoint_thread_prefix
Revises: run_input_plan
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "checkpoint_thread_prefix"
down_revision = "run_input_plan"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_messages_run_id", "messages", ["run_id"])
    op.create_index("ix_turn_results_run_id", "turn_results", ["run_id"])
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":  # SQLite: a range on the primary key does it
        return
    if bind.execute(sa.text("SELECT to_regclass('checkpoints')")).scalar() is None:
        return  # LangGraph's tables are set up before ours; without them, nothing to index
    op.execute(
        "CREATE INDEX IF NOT EXISTS tg_checkpoints_thread_prefix"
        " ON checkpoints (thread_id text_pattern_ops)"
    )


def downgrade() -> None:
    op.drop_index("ix_turn_results_run_id", "turn_results")
    op.drop_index("ix_messages_run_id", "messages")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS tg_checkpoints_thread_prefix")
