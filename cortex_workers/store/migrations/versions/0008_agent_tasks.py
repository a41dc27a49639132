"""Agents: tasks of background and foreground agent calls; child sessions; turn triggers

Revision ID: 0008
Revises: 0010
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TASK_STATUSES = ("submitted", "working", "completed", "failed", "canceled")


def _json(name: str) -> sa.Column[object]:
    return sa.Column(name, postgresql.JSONB(astext_type=sa.Text()), nullable=True)


def _when(name: str, *, now: bool = False) -> sa.Column[object]:
    default = sa.text("now()") if now else None
    return sa.Column(name, sa.DateTime(timezone=True), server_default=default, nullable=not now)


def upgrade() -> None:
    op.add_column("sessions", _json("agents"))
    op.add_column("sessions", sa.Column("parent_session_id", sa.Uuid(), nullable=True))
    op.create_foreign_key(
        "fk_sessions_parent_session_id",
        "sessions",
        "sessions",
        ["parent_session_id"],
        ["id"],
        ondelete="CASCADE",
    )
    op.add_column("turns", _json("trigger"))
    op.create_table(
        "agent_tasks",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("turn_id", sa.Uuid(), nullable=False),
        sa.Column("tool_call_id", sa.Uuid(), nullable=False),
        sa.Column("call_id", sa.String(length=200), nullable=False),
        sa.Column("step_id", sa.Uuid(), nullable=False),
        sa.Column("step_attempt", sa.Integer(), nullable=False),
        sa.Column("model_step_no", sa.Integer(), nullable=False),
        sa.Column("agent", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        _json("input"),
        _json("result"),
        _json("error"),
        _json("progress"),
        sa.Column("attempt", sa.Integer(), server_default="0", nullable=False),
        _when("lease_until"),
        _when("deadline"),
        sa.Column("child_session_id", sa.Uuid(), nullable=True),
        sa.Column("child_turn_id", sa.Uuid(), nullable=True),
        sa.Column("remote_task_id", sa.String(length=200), nullable=True),
        sa.Column("follow_up_turn_id", sa.Uuid(), nullable=True),
        _when("created_at", now=True),
        _when("finished_at"),
        sa.CheckConstraint(
            "status IN ({})".format(", ".join(f"'{s}'" for s in TASK_STATUSES)),
            name="ck_agent_tasks_status",
        ),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["turn_id"], ["turns.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tool_call_id"], ["tool_calls.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("tool_call_id"),
    )
    op.create_index("ix_agent_tasks_session_id", "agent_tasks", ["session_id"])
    op.create_index("ix_agent_tasks_child_turn_id", "agent_tasks", ["child_turn_id"])
    op.create_index(
        "ix_agent_tasks_open",
        "agent_tasks",
        ["lease_until"],
        postgresql_where=sa.text("status IN ('submitted', 'working')"),
    )


def downgrade() -> None:
    op.drop_index("ix_agent_tasks_open", table_name="agent_tasks")
    op.drop_index("ix_agent_tasks_child_turn_id", table_name="agent_tasks")
    op.drop_index("ix_agent_tasks_session_id", table_name="agent_tasks")
    op.drop_table("agent_tasks")
    op.drop_column("turns", "trigger")
    op.drop_constraint("fk_sessions_parent_session_id", "sessions", type_="foreignkey")
    op.drop_column("sessions", "parent_session_id")
    op.drop_column("sessions", "agents")
