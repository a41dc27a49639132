"""budgets, end users, modes, key use; a step's route and redactions

- `budget_counters` (spent, reserved, limit and alert of a scope in a window) and
  `budget_reservations` (one per model call attempt), amounts in integer micro-dollars;
- tenants: their overrides of `[llm.budget]` and of the mode; api_keys.last_used_at;
- sessions.user and turns.user (the end user), sessions.mode, the route requests of
  sessions and turns (sessions.route, turns.route);
- steps.route (the router's decision) and steps.redactions (counts per kind).

See docs/cost-and-privacy.md.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MODES = "mode IN ('normal', 'frugal', 'local-only')"
MODE = sa.Enum(
    "normal", "frugal", "local-only", native_enum=False, length=16, create_constraint=False
)
_TS = sa.DateTime(timezone=True)


def _uuid_fk(name: str, target: str) -> sa.Column[object]:
    return sa.Column(
        name,
        postgresql.UUID(as_uuid=True),
        sa.ForeignKey(f"{target}.id", ondelete="CASCADE"),
        nullable=False,
    )


def _tables() -> None:
    op.create_table(
        "budget_counters",
        sa.Column("scope", sa.String(120), primary_key=True),
        sa.Column("window_start", _TS, primary_key=True),
        sa.Column("resets_at", _TS, nullable=True),
        sa.Column("limit_amount", sa.BigInteger(), nullable=True),
        sa.Column("spent", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("reserved", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("alerted_at", _TS, nullable=True),
    )
    op.create_table(
        "budget_reservations",
        sa.Column("id", postgresql.UUID(as_uuid=True), primary_key=True),
        _uuid_fk("step_id", "steps"),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("call_no", sa.Integer(), nullable=False, server_default="0"),
        _uuid_fk("tenant_id", "tenants"),
        _uuid_fk("session_id", "sessions"),
        _uuid_fk("turn_id", "turns"),
        sa.Column("user", sa.String(200), nullable=True),
        sa.Column("provider", sa.String(100), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("day_start", _TS, nullable=False),
        sa.Column(
            "status",
            sa.Enum("reserved", "settled", native_enum=False, length=16, create_constraint=False),
            nullable=False,
        ),
        sa.Column("amount_micros", sa.BigInteger(), nullable=False),
        sa.Column("tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_micros", sa.BigInteger(), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("settled_by", sa.String(32), nullable=True),
        sa.Column("created_at", _TS, nullable=False, server_default=sa.func.now()),
        sa.Column("settled_at", _TS, nullable=True),
        sa.CheckConstraint(
            "status IN ('reserved', 'settled')", name="ck_budget_reservations_status"
        ),
    )
    op.create_index(
        "uq_budget_reservations_call",
        "budget_reservations",
        ["step_id", "attempt", "call_no"],
        unique=True,
    )
    op.create_index(
        "ix_budget_reservations_open",
        "budget_reservations",
        ["created_at"],
        postgresql_where=sa.text("status = 'reserved'"),
    )
    op.create_index(
        "ix_budget_reservations_tenant", "budget_reservations", ["tenant_id", "created_at"]
    )


def upgrade() -> None:
    _tables()
    op.add_column("tenants", sa.Column("daily_usd_limit_micros", sa.BigInteger(), nullable=True))
    op.add_column("tenants", sa.Column("per_user_hourly_limit", sa.Integer(), nullable=True))
    op.add_column("tenants", sa.Column("session_token_cap", sa.BigInteger(), nullable=True))
    op.add_column("tenants", sa.Column("mode", MODE, nullable=True))
    op.create_check_constraint("ck_tenants_mode", "tenants", MODES)
    op.add_column("api_keys", sa.Column("last_used_at", _TS, nullable=True))
    op.add_column("sessions", sa.Column("user", sa.String(200), nullable=True))
    op.add_column("sessions", sa.Column("mode", MODE, nullable=True))
    op.create_check_constraint("ck_sessions_mode", "sessions", MODES)
    op.add_column("sessions", sa.Column("route", postgresql.JSONB(), nullable=True))
    op.add_column("turns", sa.Column("user", sa.String(200), nullable=True))
    op.add_column("turns", sa.Column("route", postgresql.JSONB(), nullable=True))
    op.add_column("steps", sa.Column("route", postgresql.JSONB(), nullable=True))
    op.add_column("steps", sa.Column("redactions", postgresql.JSONB(), nullable=True))


def downgrade() -> None:
    for table, column in (
        ("steps", "redactions"),
        ("steps", "route"),
        ("turns", "route"),
        ("turns", "user"),
        ("sessions", "route"),
        ("sessions", "mode"),
        ("sessions", "user"),
        ("api_keys", "last_used_at"),
        ("tenants", "mode"),
        ("tenants", "session_token_cap"),
        ("tenants", "per_user_hourly_limit"),
        ("tenants", "daily_usd_limit_micros"),
    ):
        op.drop_column(table, column)
    op.drop_table("budget_reservations")
    op.drop_table("budget_counters")
