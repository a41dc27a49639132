"""schedules.last_error: why the schedule's last firing was refused

A fired turn passes the same admission as a posted one (the tenant's turns per minute, the
daily budgets, the session's token cap, the end user's hourly limit) before it is stored. A
refused firing stores no turn; its code, message and time are kept here, as the schedule API
shows them, until a firing succeeds.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("schedules", sa.Column("last_error", postgresql.JSONB(), nullable=True))


def downgrade() -> None:
    op.drop_column("schedules", "last_error")
