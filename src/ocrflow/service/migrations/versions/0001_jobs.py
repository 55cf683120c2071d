"""The jobs table.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``jobs``."""
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("owner", sa.String(64), nullable=False, server_default=""),
        sa.Column("status", sa.String(16), nullable=False, server_default="queued"),
        sa.Column("idempotency_key", sa.String(200), nullable=True),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("callback_url", sa.Text(), nullable=True),
        sa.Column("callback_state", sa.String(16), nullable=False, server_default="none"),
        sa.Column("documents", sa.JSON(), nullable=False),
        sa.Column("pages_done", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("pages_total", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("failures", sa.JSON(), nullable=False),
        sa.Column("created", sa.Float(), nullable=False),
        sa.Column("started", sa.Float(), nullable=True),
        sa.Column("finished", sa.Float(), nullable=True),
        sa.UniqueConstraint("owner", "idempotency_key", name="uq_jobs_owner_key"),
    )
    op.create_index("ix_jobs_owner", "jobs", ["owner"])
    op.create_index("ix_jobs_status", "jobs", ["status"])
    op.create_index("ix_jobs_created", "jobs", ["created"])


def downgrade() -> None:
    """Drop ``jobs``."""
    op.drop_table("jobs")
