"""parked calls: a tool call whose MCP server answered with a task

`parked_calls` has one row per tool call that an MCP server answered with a task handle (the
Tasks extension): the server, the task's id, how often to look at it and until when. The tool
step stays leased, held by no worker, while polls on the `tools` queue send `tasks/get`; the
poll that finds the task ended stores the call's result and marks the row ended (docs/mcp.md,
"Tools that answer with a task").

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "parked_calls",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column(
            "tool_call_id",
            sa.Uuid(),
            sa.ForeignKey("tool_calls.id", ondelete="CASCADE"),
            nullable=False,
            unique=True,
        ),
        sa.Column(
            "turn_id", sa.Uuid(), sa.ForeignKey("turns.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("step_id", sa.Uuid(), nullable=False),
        sa.Column("step_attempt", sa.Integer(), nullable=False),
        sa.Column("step_no", sa.Integer(), nullable=False),
        sa.Column("model_step_no", sa.Integer(), nullable=False),
        sa.Column("call_id", sa.String(length=200), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("arguments", postgresql.JSONB(), nullable=False),
        sa.Column("server", sa.String(length=40), nullable=False),
        sa.Column("task_id", sa.String(length=500), nullable=False),
        sa.Column("poll_s", sa.Float(), nullable=False),
        sa.Column("next_poll_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=False),
        sa.Column("polls", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("failures", sa.Integer(), nullable=False, server_default="0"),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index(
        "ix_parked_calls_due",
        "parked_calls",
        ["next_poll_at"],
        postgresql_where=sa.text("ended_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_parked_calls_due", table_name="parked_calls")
    op.drop_table("parked_calls")
