"""lifecycle vocabularies: CHECK constraints on statuses, kinds and severities

Each column keeps its type (VARCHAR(16)); the constraint holds it to the closed set that
`cortex_workers.vocabulary` spells (`tests/test_vocabulary.py` compares the two). The values
are written out here, as they were when this revision was made: a later change of a set is a
revision of its own.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHECKS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("turns", "status", ("queued", "running", "done", "failed", "cancelled")),
    ("steps", "status", ("pending", "leased", "done", "failed", "cancelled")),
    ("steps", "kind", ("model", "tool", "summarize")),
    ("tool_calls", "status", ("pending", "done")),
    ("tool_calls", "severity", ("ok", "info", "warning", "error")),
    (
        "proposals",
        "status",
        (
            "pending",
            "confirmed",
            "rejected",
            "expired",
            "executing",
            "executed",
            "execution_failed",
        ),
    ),
    ("decisions", "kind", ("model", "tool")),
)


def upgrade() -> None:
    for table, column, values in CHECKS:
        listed = ", ".join(f"'{v}'" for v in values)
        op.create_check_constraint(f"ck_{table}_{column}", table, f"{column} IN ({listed})")


def downgrade() -> None:
    for table, column, _ in reversed(CHECKS):
        op.drop_constraint(f"ck_{table}_{column}", table, type_="check")
