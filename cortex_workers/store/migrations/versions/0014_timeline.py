"""the execution timeline of turns

- `timeline_events`: one row per event of a turn's execution (route, retry, fallback,
  rate_limited, budget, redaction, tool, handoff, anomaly, recovery, failure, completion), in
  the order recorded. See docs/checkpoints.md.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KINDS = (
    "route",
    "retry",
    "fallback",
    "rate_limited",
    "budget",
    "redaction",
    "tool",
    "handoff",
    "anomaly",
    "recovery",
    "failure",
    "completion",
)


def upgrade() -> None:
    op.create_table(
        "timeline_events",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column(
            "turn_id",
            postgresql.UUID(as_uuid=True),
            sa.ForeignKey("turns.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("step", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("data", postgresql.JSONB(), nullable=False),
        sa.Column(
            "at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("clock_timestamp()"),
        ),
        sa.CheckConstraint(
            "kind IN (" + ", ".join(f"'{k}'" for k in KINDS) + ")",
            name="ck_timeline_events_kind",
        ),
    )
    op.create_index("ix_timeline_events_turn", "timeline_events", ["turn_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_timeline_events_turn", table_name="timeline_events")
    op.drop_table("timeline_events")
