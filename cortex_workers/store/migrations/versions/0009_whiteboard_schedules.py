"""the whiteboard of a coordinator session, and scheduled turns

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import UUID

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _now() -> sa.Column[Any]:
    return sa.Column(
        "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
    )


def _session() -> sa.Column[Any]:
    return sa.Column(
        "session_id",
        UUID(as_uuid=True),
        sa.ForeignKey("sessions.id", ondelete="CASCADE"),
        nullable=False,
    )


def upgrade() -> None:
    op.create_table(
        "whiteboards",
        sa.Column(
            "session_id",
            UUID(as_uuid=True),
            sa.ForeignKey("sessions.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("mission", sa.Text, nullable=False, server_default=""),
        sa.Column("focus", sa.Text, nullable=False, server_default=""),
        sa.Column("progress", sa.SmallInteger),
        sa.Column("progress_note", sa.Text, nullable=False, server_default=""),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint("progress BETWEEN 0 AND 100", name="ck_whiteboards_progress"),
    )
    op.create_table(
        "whiteboard_blockers",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        _session(),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False, server_default="open"),
        sa.Column("resolution", sa.Text),
        sa.Column("source", sa.String(200), nullable=False),
        _now(),
        sa.Column("resolved_at", sa.DateTime(timezone=True)),
        sa.CheckConstraint("status IN ('open', 'resolved')", name="ck_whiteboard_blockers_status"),
    )
    op.create_index("ix_whiteboard_blockers_session", "whiteboard_blockers", ["session_id", "id"])
    op.create_table(
        "whiteboard_entries",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        _session(),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("detail", sa.Text),
        sa.Column("source", sa.String(200), nullable=False),
        _now(),
        sa.CheckConstraint(
            "kind IN ('mission', 'progress', 'blocker', 'decision', 'note')",
            name="ck_whiteboard_entries_kind",
        ),
    )
    op.create_index("ix_whiteboard_entries_session", "whiteboard_entries", ["session_id", "id"])
    op.create_table(
        "schedules",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column(
            "tenant_id",
            UUID(as_uuid=True),
            sa.ForeignKey("tenants.id", ondelete="CASCADE"),
            nullable=False,
        ),
        _session(),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("cron", sa.String(200)),
        sa.Column("timezone", sa.String(64)),
        sa.Column("every_s", sa.Float),
        sa.Column("next_run_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_run_at", sa.DateTime(timezone=True)),
        sa.Column("last_turn_id", UUID(as_uuid=True)),
        sa.Column("fired", sa.Integer, nullable=False, server_default="0"),
        _now(),
        sa.CheckConstraint("(cron IS NULL) <> (every_s IS NULL)", name="ck_schedules_one_rule"),
        sa.CheckConstraint("every_s >= 1", name="ck_schedules_every_s"),
    )
    op.create_index("ix_schedules_session", "schedules", ["session_id", "created_at"])
    op.create_index("ix_schedules_next_run_at", "schedules", ["next_run_at"])


def downgrade() -> None:
    op.drop_table("schedules")
    op.drop_table("whiteboard_entries")
    op.drop_table("whiteboard_blockers")
    op.drop_table("whiteboards")
