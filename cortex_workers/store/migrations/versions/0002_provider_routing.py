"""provider routing: fallback on steps, cache tokens, turn warnings

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("steps", sa.Column("fallback_from", sa.String(length=300), nullable=True))
    op.add_column(
        "steps", sa.Column("cache_read_tokens", sa.Integer(), server_default="0", nullable=False)
    )
    op.add_column(
        "steps", sa.Column("cache_write_tokens", sa.Integer(), server_default="0", nullable=False)
    )
    op.add_column(
        "turns", sa.Column("warnings", postgresql.JSONB(astext_type=sa.Text()), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("turns", "warnings")
    op.drop_column("steps", "cache_write_tokens")
    op.drop_column("steps", "cache_read_tokens")
    op.drop_column("steps", "fallback_from")
