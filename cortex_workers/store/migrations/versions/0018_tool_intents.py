"""tool intents: a tool call with side effects is recorded before it runs

`tool_intents` has one row per tool call whose tool has effects outside our database (a
plugin or MCP tool, or an operator's python tool, not declared read-only), committed before
the call is sent, with the idempotency key the receiver is given. A takeover that finds the
row while the call has no result knows the call may have happened: it re-sends it with the
same key only when the tool is idempotent by key, and otherwise ends the call with an
"outcome unknown" result (docs/mcp.md, "Exactly once").

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tool_intents",
        sa.Column(
            "tool_call_id",
            sa.Uuid(),
            sa.ForeignKey("tool_calls.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("idempotency_key", sa.String(length=80), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("sends", sa.Integer(), nullable=False, server_default="1"),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )


def downgrade() -> None:
    op.drop_table("tool_intents")
