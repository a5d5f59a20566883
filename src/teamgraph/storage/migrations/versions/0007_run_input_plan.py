"""a run's explicit plan, stored with its row (a run killed before its first checkpoint keeps it)

Revision ID: run_input_plan
Revises: session_origin
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "run_input_plan"
down_revision = "session_origin"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("input_plan", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("input_plan")
