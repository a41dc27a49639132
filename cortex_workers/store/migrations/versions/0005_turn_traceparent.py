"""turns.traceparent: the trace context of the request that created the turn

The API stores the W3C `traceparent` of its request span with the turn (NULL when tracing is
off); every step of the turn, on whichever worker, starts its span from it, so a turn is one
trace. See docs/operations.md.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("turns", sa.Column("traceparent", sa.String(length=64), nullable=True))


def downgrade() -> None:
    op.drop_column("turns", "traceparent")
