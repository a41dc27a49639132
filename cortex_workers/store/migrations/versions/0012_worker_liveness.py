"""Worker liveness: steps name the process holding their lease; workers beat in `workers`;
indexes for retention and the reconciler's scans on a large history

`steps.holder` is the process (host, pid, boot nonce) that holds a leased step, and
`steps.renewed_at` when its lease was taken or last renewed; `workers` holds
one row per live worker process, whose `seen_at` its heartbeat thread refreshes. A leased step
whose holder's heartbeat is older than `CORTEX_LIVENESS_S` may be claimed again at once
(docs/reliability.md). The indexes keep retention's and the reconciler's scans off sequential
scans of big tables (docs/retention.md, tests/store/test_hot_plans.py).

Revision ID: 0012
Revises: 0009
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("steps", sa.Column("holder", sa.String(length=200), nullable=True))
    op.add_column("steps", sa.Column("renewed_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "workers",
        sa.Column("holder", sa.String(length=200), nullable=False),
        sa.Column("hostname", sa.String(length=200), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column(
            "started_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "seen_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.PrimaryKeyConstraint("holder"),
    )
    op.create_index(
        "ix_turns_finished",
        "turns",
        ["tenant_id", "finished_at"],
        postgresql_where=sa.text("finished_at IS NOT NULL"),
    )
    op.create_index("ix_decisions_created", "decisions", ["tenant_id", "created_at"])
    # what deleting a turn cascades to, or checks (retention deletes turns)
    op.create_index("ix_messages_turn_id", "messages", ["turn_id"])
    op.create_index("ix_tool_calls_turn_id", "tool_calls", ["turn_id"])
    op.create_index("ix_proposals_turn_id", "proposals", ["turn_id"])
    op.create_index(
        "ix_steps_parent_step_id",
        "steps",
        ["parent_step_id"],
        postgresql_where=sa.text("parent_step_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_steps_parent_step_id", table_name="steps")
    op.drop_index("ix_proposals_turn_id", table_name="proposals")
    op.drop_index("ix_tool_calls_turn_id", table_name="tool_calls")
    op.drop_index("ix_messages_turn_id", table_name="messages")
    op.drop_index("ix_decisions_created", table_name="decisions")
    op.drop_index("ix_turns_finished", table_name="turns")
    op.drop_table("workers")
    op.drop_column("steps", "renewed_at")
    op.drop_column("steps", "holder")
