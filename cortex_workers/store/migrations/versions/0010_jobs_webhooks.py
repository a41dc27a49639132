"""jobs, batches and webhooks: LLM-function jobs, and the outbox of signed webhook events

`cortex_record_event(tenant, type, data)` records an event in the caller's transaction, with
one pending delivery per subscribed webhook (nothing when no webhook of the tenant listens for
that type). Triggers call it when a turn ends and when a proposal is created, so every path
that ends a turn (a model step's reply, a cancel, the reconciler) records its event in the
same transaction. See docs/webhooks.md.

Revision ID: 0010
Revises: 0006
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "0010"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EVENT_TYPES = (
    "turn.completed",
    "turn.failed",
    "turn.cancelled",
    "proposal.created",
    "task.completed",
    "job.completed",
    "batch.completed",
    "budget.alert",
)


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _now() -> sa.Column[Any]:
    return sa.Column(
        "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
    )


def _tenant() -> sa.Column[Any]:
    return sa.Column(
        "tenant_id", sa.Uuid(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
    )


def _webhook_tables() -> None:
    listed = ", ".join(repr(t) for t in EVENT_TYPES)
    op.create_table(
        "webhooks",
        sa.Column("id", sa.Uuid(), primary_key=True),
        _tenant(),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("events", pg.ARRAY(sa.String(32)), nullable=False),
        sa.Column("secret", sa.String(100), nullable=False),
        _now(),
        sa.CheckConstraint(
            f"events <@ ARRAY[{listed}]::varchar[] AND cardinality(events) > 0",
            name="ck_webhooks_events",
        ),
    )
    op.create_index("ix_webhooks_tenant_id", "webhooks", ["tenant_id"])
    op.create_table(
        "webhook_events",
        sa.Column("id", sa.Uuid(), primary_key=True),
        _tenant(),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("data", pg.JSONB(), nullable=False),
        _now(),
        sa.CheckConstraint(_in("type", EVENT_TYPES), name="ck_webhook_events_type"),
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column(
            "event_id",
            sa.Uuid(),
            sa.ForeignKey("webhook_events.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "webhook_id",
            sa.Uuid(),
            sa.ForeignKey("webhooks.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column(
            "next_attempt_at",
            sa.DateTime(timezone=True),
            server_default=sa.func.now(),
            nullable=False,
        ),
        sa.Column("lease_until", sa.DateTime(timezone=True)),
        _now(),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.UniqueConstraint("event_id", "webhook_id"),
        sa.CheckConstraint(
            _in("status", ("pending", "succeeded", "failed")), name="ck_webhook_deliveries_status"
        ),
    )
    op.create_index(
        "ix_webhook_deliveries_due",
        "webhook_deliveries",
        ["next_attempt_at"],
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index("ix_webhook_deliveries_webhook_id", "webhook_deliveries", ["webhook_id"])
    op.create_table(
        "webhook_attempts",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column(
            "delivery_id",
            sa.Uuid(),
            sa.ForeignKey("webhook_deliveries.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("status_code", sa.Integer()),
        sa.Column("error", sa.Text()),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("next_retry_at", sa.DateTime(timezone=True)),
        _now(),
        sa.UniqueConstraint("delivery_id", "attempt"),
    )


def _job_tables() -> None:
    op.create_table(
        "batches",
        sa.Column("id", sa.Uuid(), primary_key=True),
        _tenant(),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("succeeded", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("failed", sa.Integer(), nullable=False, server_default="0"),
        _now(),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.CheckConstraint(_in("status", ("running", "completed")), name="ck_batches_status"),
    )
    op.create_index("ix_batches_tenant_id", "batches", ["tenant_id"])
    op.create_table(
        "jobs",
        sa.Column("id", sa.Uuid(), primary_key=True),
        _tenant(),
        sa.Column("batch_id", sa.Uuid(), sa.ForeignKey("batches.id", ondelete="CASCADE")),
        sa.Column("batch_index", sa.Integer()),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("instructions", sa.Text(), nullable=False),
        sa.Column("input", pg.JSONB(), nullable=False),
        sa.Column("result_schema", pg.JSONB(), nullable=False),
        sa.Column("provider", sa.String(100)),
        sa.Column("model", sa.String(200)),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("metadata", pg.JSONB(), nullable=False, server_default="{}"),
        sa.Column("attempt", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("lease_until", sa.DateTime(timezone=True)),
        sa.Column("result", pg.JSONB()),
        sa.Column("attempts", pg.JSONB(), nullable=False, server_default="[]"),
        sa.Column("error", pg.JSONB()),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("cost_usd", sa.Numeric(14, 6), nullable=False, server_default="0"),
        _now(),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.UniqueConstraint("batch_id", "batch_index"),
        sa.CheckConstraint(
            _in("status", ("queued", "running", "succeeded", "failed")), name="ck_jobs_status"
        ),
    )
    op.create_index("ix_jobs_tenant_id", "jobs", ["tenant_id"])
    op.create_index(
        "ix_jobs_open",
        "jobs",
        ["updated_at"],
        postgresql_where=sa.text("status IN ('queued', 'running')"),
    )


RECORD_EVENT = """
CREATE FUNCTION cortex_record_event(p_tenant uuid, p_type text, p_data jsonb) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    event_id uuid;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM webhooks WHERE tenant_id = p_tenant AND p_type = ANY(events))
    THEN
        RETURN NULL;
    END IF;
    event_id := gen_random_uuid();
    INSERT INTO webhook_events (id, tenant_id, type, data)
        VALUES (event_id, p_tenant, p_type, p_data);
    INSERT INTO webhook_deliveries (id, event_id, webhook_id, status)
        SELECT gen_random_uuid(), event_id, w.id, 'pending' FROM webhooks w
        WHERE w.tenant_id = p_tenant AND p_type = ANY(w.events);
    RETURN event_id;
END $$;

CREATE FUNCTION cortex_turn_ended_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cortex_record_event(
        NEW.tenant_id,
        CASE NEW.status WHEN 'done' THEN 'turn.completed'
                        WHEN 'failed' THEN 'turn.failed'
                        ELSE 'turn.cancelled' END,
        jsonb_build_object('turn_id', NEW.id, 'session_id', NEW.session_id,
                           'status', NEW.status, 'error_code', NEW.error ->> 'code'));
    RETURN NULL;
END $$;

CREATE TRIGGER turns_ended_event AFTER UPDATE OF status ON turns FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status
          AND NEW.status IN ('done', 'failed', 'cancelled'))
    EXECUTE FUNCTION cortex_turn_ended_event();

CREATE FUNCTION cortex_proposal_created_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cortex_record_event(
        NEW.tenant_id, 'proposal.created',
        jsonb_build_object('proposal_id', NEW.id, 'session_id', NEW.session_id,
                           'turn_id', NEW.turn_id, 'status', NEW.status));
    RETURN NULL;
END $$;

CREATE TRIGGER proposals_created_event AFTER INSERT ON proposals FOR EACH ROW
    EXECUTE FUNCTION cortex_proposal_created_event();
"""

DROP_RECORD_EVENT = """
DROP TRIGGER IF EXISTS proposals_created_event ON proposals;
DROP FUNCTION IF EXISTS cortex_proposal_created_event();
DROP TRIGGER IF EXISTS turns_ended_event ON turns;
DROP FUNCTION IF EXISTS cortex_turn_ended_event();
DROP FUNCTION IF EXISTS cortex_record_event(uuid, text, jsonb);
"""


def upgrade() -> None:
    _webhook_tables()
    _job_tables()
    op.execute(RECORD_EVENT)


def downgrade() -> None:
    op.execute(DROP_RECORD_EVENT)
    for table in ("jobs", "batches", "webhook_attempts", "webhook_deliveries"):
        op.drop_table(table)
    op.drop_table("webhook_events")
    op.drop_table("webhooks")
