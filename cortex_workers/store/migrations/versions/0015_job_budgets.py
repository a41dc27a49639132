"""budgets of jobs: a budget reservation belongs to a turn's step or to an LLM-function job

`budget_reservations` gains `job_id` (the job whose model call holds it; `attempt` is the job's
run, `call_no` its call number), its step, turn and session become nullable, and a CHECK
(`ck_budget_reservations_owner`) says that exactly one owner is set: a step (with its turn and
session) or a job. See docs/jobs.md and docs/cost-and-privacy.md.

Revision ID: 0015
Revises: 0012
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OWNER = (
    "(job_id IS NULL AND step_id IS NOT NULL AND turn_id IS NOT NULL "
    "AND session_id IS NOT NULL) "
    "OR (job_id IS NOT NULL AND step_id IS NULL AND turn_id IS NULL AND session_id IS NULL)"
)
STEP_OWNED = ("step_id", "turn_id", "session_id")


def upgrade() -> None:
    op.add_column(
        "budget_reservations",
        sa.Column("job_id", sa.Uuid(), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=True),
    )
    for column in STEP_OWNED:
        op.alter_column("budget_reservations", column, nullable=True)
    op.create_check_constraint("ck_budget_reservations_owner", "budget_reservations", OWNER)
    op.create_index(
        "uq_budget_reservations_job_call",
        "budget_reservations",
        ["job_id", "attempt", "call_no"],
        unique=True,
    )


def downgrade() -> None:
    op.execute("DELETE FROM budget_reservations WHERE job_id IS NOT NULL")
    op.drop_index("uq_budget_reservations_job_call", table_name="budget_reservations")
    op.drop_constraint("ck_budget_reservations_owner", "budget_reservations", type_="check")
    for column in STEP_OWNED:
        op.alter_column("budget_reservations", column, nullable=False)
    op.drop_column("budget_reservations", "job_id")
