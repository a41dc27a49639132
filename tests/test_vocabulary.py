"""The closed sets of `cortex_workers.vocabulary` are the database's too: each column that holds
one has a CHECK constraint listing exactly the enum's values, and Postgres refuses any other."""

from __future__ import annotations

import enum
import re
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy.exc
from sqlalchemy import Engine, insert, text
from support import Stack

from cortex_workers.store import job_tables, models, timeline, webhook_tables
from cortex_workers.store import whiteboard as _whiteboard_tables  # noqa: F401 (its tables)
from cortex_workers.store.db import make_engine
from cortex_workers.vocabulary import (
    BatchStatus,
    BlockerStatus,
    DecisionKind,
    DeliveryStatus,
    JobStatus,
    LlmMode,
    ProposalStatus,
    ReservationStatus,
    StepKind,
    StepStatus,
    TaskStatus,
    TimelineKind,
    ToolCallStatus,
    ToolSeverity,
    TurnStatus,
    WebhookEventType,
    WhiteboardEntryKind,
)

assert job_tables and webhook_tables and timeline  # their tables join `models.Base.metadata`

CHECKED: dict[tuple[str, str], type[enum.Enum]] = {
    ("turns", "status"): TurnStatus,
    ("steps", "status"): StepStatus,
    ("steps", "kind"): StepKind,
    ("tool_calls", "status"): ToolCallStatus,
    ("tool_calls", "severity"): ToolSeverity,
    ("proposals", "status"): ProposalStatus,
    ("decisions", "kind"): DecisionKind,
    ("webhook_events", "type"): WebhookEventType,
    ("webhook_deliveries", "status"): DeliveryStatus,
    ("jobs", "status"): JobStatus,
    ("batches", "status"): BatchStatus,
    ("tenants", "mode"): LlmMode,
    ("sessions", "mode"): LlmMode,
    ("budget_reservations", "status"): ReservationStatus,
    ("agent_tasks", "status"): TaskStatus,
    ("whiteboard_blockers", "status"): BlockerStatus,
    ("whiteboard_entries", "kind"): WhiteboardEntryKind,
    ("timeline_events", "kind"): TimelineKind,
}
ARRAYS: dict[tuple[str, str], type[enum.Enum]] = {("webhooks", "events"): WebhookEventType}
"""Array columns whose every element is one of the enum's values."""


@pytest.fixture(scope="module")
def engine(stack: Stack) -> Iterator[Engine]:
    engine = make_engine(stack.database_url, pool_size=1)
    yield engine
    engine.dispose()


def _check_values(engine: Engine, table: str, name: str) -> set[str]:
    """The quoted values of a CHECK constraint of the migrated database, as Postgres keeps it
    (`((status)::text = ANY ((ARRAY['queued'::character varying, …])::text[]))`)."""
    with engine.connect() as conn:
        definition = conn.execute(
            text(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conname = :name AND conrelid = CAST(:table AS regclass) AND contype = 'c'"
            ),
            {"name": name, "table": table},
        ).scalar_one()
    return set(re.findall(r"'([^']*)'", definition))


@pytest.mark.parametrize(
    ("table", "column"), sorted({**CHECKED, **ARRAYS}), ids="{0[0]}.{0[1]}".format
)
def test_the_check_constraint_lists_exactly_the_enums_values(
    engine: Engine, table: str, column: str
) -> None:
    members = {**CHECKED, **ARRAYS}[(table, column)]
    assert _check_values(engine, table, f"ck_{table}_{column}") == {m.value for m in members}


@pytest.mark.parametrize(
    ("table", "column"), sorted({**CHECKED, **ARRAYS}), ids="{0[0]}.{0[1]}".format
)
def test_the_models_declare_the_same_constraint(table: str, column: str) -> None:
    constraints = {c.name: c for c in models.Base.metadata.tables[table].constraints}
    declared = constraints[f"ck_{table}_{column}"]
    assert isinstance(declared, sqlalchemy.CheckConstraint)
    members = {**CHECKED, **ARRAYS}[(table, column)]
    assert set(re.findall(r"'([^']*)'", str(declared.sqltext))) == {m.value for m in members}


def test_every_column_of_a_vocabulary_type_is_checked() -> None:
    typed = {
        (table.name, column.name)
        for table in models.Base.metadata.tables.values()
        for column in table.columns
        if isinstance(column.type, sqlalchemy.Enum)
    }
    assert typed == set(CHECKED)


def test_postgres_refuses_a_status_outside_the_set(engine: Engine) -> None:
    """Written around the ORM type (which would refuse it first), as any other client might."""
    with engine.connect() as conn:
        tenant = conn.execute(
            insert(models.Tenant)
            .values(id=uuid.uuid4(), name=f"vocabulary-{uuid.uuid4().hex[:8]}")
            .returning(models.Tenant.id)
        ).scalar_one()
        session = conn.execute(
            insert(models.Session)
            .values(id=uuid.uuid4(), tenant_id=tenant)
            .returning(models.Session.id)
        ).scalar_one()
        with pytest.raises(sqlalchemy.exc.IntegrityError, match="ck_turns_status"):
            conn.execute(
                text(
                    "INSERT INTO turns (id, tenant_id, session_id, seq, status, content) "
                    "VALUES (:id, :tenant, :session, 1, 'paused', 'hi')"
                ),
                {"id": uuid.uuid4(), "tenant": tenant, "session": session},
            )
        conn.rollback()


def test_the_orm_type_refuses_it_before_postgres_sees_it(engine: Engine) -> None:
    with engine.connect() as conn, pytest.raises(sqlalchemy.exc.StatementError):
        conn.execute(
            insert(models.Step).values(
                id=uuid.uuid4(), turn_id=uuid.uuid4(), step_no=1, kind="thinking"
            )
        )


def test_the_task_statuses_are_a2as_spellings() -> None:
    assert [s.value for s in TaskStatus] == [
        "submitted",
        "working",
        "completed",
        "failed",
        "canceled",
    ]


def test_the_recovery_settings_spell_the_anomaly_kinds_and_actions() -> None:
    from typing import get_args

    from cortex_workers.recovery_settings import ActionName, AnomalyName
    from cortex_workers.vocabulary import AnomalyKind, RecoveryAction

    assert set(get_args(AnomalyName)) == {k.value for k in AnomalyKind}
    assert set(get_args(ActionName)) == {a.value for a in RecoveryAction}
