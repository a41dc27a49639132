"""openai responses and conversations: what OpenAI's shapes add to turns and sessions

`openai_responses` (one row per turn created through `POST /v1/responses`: the request as
OpenAI's fields, the previous response, whether it was deleted) and `openai_conversations`
(one row per session created as a conversation, with OpenAI's string metadata);
`webhooks.shape`: a subscription's events in our form or OpenAI's. See
docs/openai-compatibility.md.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _fk(table: str) -> sa.ForeignKey:
    return sa.ForeignKey(f"{table}.id", ondelete="CASCADE")


def upgrade() -> None:
    op.create_table(
        "openai_responses",
        sa.Column("turn_id", sa.Uuid(), _fk("turns"), primary_key=True),
        sa.Column("tenant_id", sa.Uuid(), _fk("tenants"), nullable=False),
        sa.Column("session_id", sa.Uuid(), _fk("sessions"), nullable=False),
        sa.Column("conversation", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("previous_response_id", sa.Uuid(), nullable=True),
        sa.Column("request", JSONB(), nullable=False),
        sa.Column("deleted", sa.Boolean(), server_default="false", nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
    )
    op.create_index("ix_openai_responses_session", "openai_responses", ["session_id"])
    op.create_table(
        "openai_conversations",
        sa.Column("session_id", sa.Uuid(), _fk("sessions"), primary_key=True),
        sa.Column("tenant_id", sa.Uuid(), _fk("tenants"), nullable=False),
        sa.Column("metadata", JSONB(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
    )
    op.create_index("ix_openai_conversations_tenant_id", "openai_conversations", ["tenant_id"])

    op.add_column(
        "webhooks", sa.Column("shape", sa.String(16), server_default="cortex", nullable=False)
    )


def downgrade() -> None:
    op.drop_column("webhooks", "shape")
    op.drop_table("openai_conversations")
    op.drop_table("openai_responses")
