"""Tables. Postgres is the record of everything and the queue of record for steps.

Uniqueness constraints make every redelivered write a no-op: one turn per idempotency key, one
active turn per session, one step per (turn, step_no), one assistant message per model step, one
tool message per tool step, one tool call per (model step, provider call id).

It is long because the core tables are declared together, one class each, so their keys and
constraints read side by side; the tables of budgets, jobs, webhooks and the whiteboard live in
their own modules on the same metadata.
"""

from __future__ import annotations

import enum
import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any, cast

from pydantic import ConfigDict, with_config
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Enum,
    ForeignKey,
    Index,
    Integer,
    Numeric,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from typing_extensions import TypedDict

from ..messages import ErrorDoc, JsonObject, TaskProgress
from ..vocabulary import (
    DecisionKind,
    LlmMode,
    ProposalStatus,
    StepKind,
    StepStatus,
    TaskStatus,
    ToolCallStatus,
    ToolSeverity,
    TurnStatus,
)


def _values(members: type[enum.Enum]) -> list[str]:
    return [str(m.value) for m in members]


LIFECYCLE_VALUE = Enum(
    enum.Enum,
    native_enum=False,
    length=16,
    values_callable=_values,
    validate_strings=True,
)
"""How a column annotated with one of `vocabulary`'s enums is stored: as its value, in a
VARCHAR(16) (no Postgres ENUM type), checked on the way in and read back as the member. The
closed set is enforced by the table's CHECK constraint (`one_of`)."""


@with_config(ConfigDict(extra="allow"))  # the API shows a stored document whole
class TurnTrigger(TypedDict):
    """What started a turn no user posted: an agent task that ended (`kind` "task")."""

    kind: str
    task_id: str


class Base(DeclarativeBase):
    type_annotation_map = {
        JsonObject: JSONB,
        list[Any]: JSONB,
        uuid.UUID: UUID(as_uuid=True),
        enum.Enum: LIFECYCLE_VALUE,
    }


def one_of(column: str, members: type[enum.Enum], *, table: str) -> CheckConstraint:
    """`column IN (…every value of members…)`, named `ck_<table>_<column>` (migration 0004
    creates the same constraints)."""
    values = ", ".join(f"'{v}'" for v in _values(members))
    return CheckConstraint(f"{column} IN ({values})", name=f"ck_{table}_{column}")


def _pk() -> Mapped[uuid.UUID]:
    return mapped_column(primary_key=True, default=uuid.uuid4)


def _now() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), server_default=func.now())


class Tenant(Base):
    __tablename__ = "tenants"
    __table_args__ = (one_of("mode", LlmMode, table="tenants"),)
    id: Mapped[uuid.UUID] = _pk()
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime] = _now()
    # Overrides of `[llm.budget]` and `[llm] mode` (None: the configured value).
    daily_usd_limit_micros: Mapped[int | None] = mapped_column(BigInteger)
    per_user_hourly_limit: Mapped[int | None] = mapped_column(Integer)
    session_token_cap: Mapped[int | None] = mapped_column(BigInteger)
    mode: Mapped[LlmMode | None] = mapped_column()


class ApiKey(Base):
    __tablename__ = "api_keys"
    id: Mapped[uuid.UUID] = _pk()
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    prefix: Mapped[str] = mapped_column(String(32), index=True)
    key_hash: Mapped[str] = mapped_column(String(128), unique=True)
    created_at: Mapped[datetime] = _now()
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """Recorded at most once a minute per key."""


class Session(Base):
    __tablename__ = "sessions"
    __table_args__ = (one_of("mode", LlmMode, table="sessions"),)
    id: Mapped[uuid.UUID] = _pk()
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str | None] = mapped_column(String(200))
    system_prompt: Mapped[str | None] = mapped_column(Text)
    provider: Mapped[str | None] = mapped_column(String(100))
    model: Mapped[str | None] = mapped_column(String(200))
    tools: Mapped[list[Any] | None] = mapped_column(JSONB)
    metadata_: Mapped[JsonObject] = mapped_column("metadata", JSONB, default=dict)
    user: Mapped[str | None] = mapped_column(String(200))
    """The end user in the caller's system (per-user limits and usage are keyed by it)."""
    mode: Mapped[LlmMode | None] = mapped_column()
    route: Mapped[JsonObject | None] = mapped_column(JSONB)
    """The session's route request (tier, cost ceiling, latency SLA, capabilities)."""
    summary: Mapped[str] = mapped_column(Text, default="", server_default="")
    summary_upto_seq: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    last_message_seq: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    last_turn_seq: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    model_calls: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    input_tokens: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    output_tokens: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    cost_usd: Mapped[Decimal] = mapped_column(Numeric(14, 6), default=0, server_default="0")
    agents: Mapped[list[Any] | None] = mapped_column(JSONB)
    """Agents offered as tools (`<name>_agent`)."""
    parent_session_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE", name="fk_sessions_parent_session_id")
    )
    """The session whose agent call this (child) session runs."""
    created_at: Mapped[datetime] = _now()
    forked_from_session_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("sessions.id", ondelete="SET NULL")
    )
    forked_from_turn_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))


class Turn(Base):
    __tablename__ = "turns"
    __table_args__ = (
        UniqueConstraint("session_id", "seq"),
        Index(
            "uq_turns_idempotency",
            "tenant_id",
            "idempotency_key",
            unique=True,
            postgresql_where=text("idempotency_key IS NOT NULL"),
        ),
        Index(
            "uq_turns_one_running_per_session",
            "session_id",
            unique=True,
            postgresql_where=text("status = 'running'"),
        ),
        Index("ix_turns_queued", "session_id", "seq", postgresql_where=text("status = 'queued'")),
        Index(
            "ix_turns_finished",
            "tenant_id",
            "finished_at",
            postgresql_where=text("finished_at IS NOT NULL"),
        ),
        one_of("status", TurnStatus, table="turns"),
    )
    id: Mapped[uuid.UUID] = _pk()
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    session_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    status: Mapped[TurnStatus] = mapped_column(default=TurnStatus.QUEUED)
    content: Mapped[str] = mapped_column(Text)
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    request_hash: Mapped[str | None] = mapped_column(String(64))
    user: Mapped[str | None] = mapped_column(String(200))
    """The end user of this turn (else the session's)."""
    route: Mapped[JsonObject | None] = mapped_column(JSONB)
    """The turn's own route request, when it gives one."""
    options: Mapped[JsonObject | None] = mapped_column(JSONB)
    """What the turn asks of its model calls (`turns.options.TurnOptions`), when anything."""
    traceparent: Mapped[str | None] = mapped_column(String(64))
    """The W3C traceparent of the API request that created the turn (None when tracing was
    off): its steps' spans are children of it, so the turn is one trace."""
    deadline: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    model_steps: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    input_tokens: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    output_tokens: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    cost_usd: Mapped[Decimal] = mapped_column(Numeric(14, 6), default=0, server_default="0")
    answer: Mapped[str | None] = mapped_column(Text)
    error: Mapped[ErrorDoc | None] = mapped_column(JSONB)
    warnings: Mapped[list[Any] | None] = mapped_column(JSONB)
    trigger: Mapped[TurnTrigger | None] = mapped_column(JSONB)
    """What started a turn that no user posted: `{"kind": "task", "task_id"}`."""
    created_at: Mapped[datetime] = _now()
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Step(Base):
    """One unit of work on a queue; the checkpoint chain runs through `parent_step_id`."""

    __tablename__ = "steps"
    __table_args__ = (
        UniqueConstraint("turn_id", "step_no"),
        Index(
            "ix_steps_open",
            "status",
            "lease_until",
            postgresql_where=text("status IN ('pending', 'leased')"),
        ),
        Index(
            "ix_steps_parent_step_id",
            "parent_step_id",
            postgresql_where=text("parent_step_id IS NOT NULL"),
        ),
        one_of("status", StepStatus, table="steps"),
        one_of("kind", StepKind, table="steps"),
    )
    id: Mapped[uuid.UUID] = _pk()
    turn_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("turns.id", ondelete="CASCADE"))
    step_no: Mapped[int] = mapped_column(Integer)
    kind: Mapped[StepKind]
    status: Mapped[StepStatus] = mapped_column(default=StepStatus.PENDING)
    attempt: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    available_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )
    published_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    parent_step_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("steps.id"))
    call_index: Mapped[int | None] = mapped_column(Integer)
    tool_call_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    holder: Mapped[str | None] = mapped_column(String(200))
    """The worker process holding the lease (`workers.holder`)."""
    renewed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """When the lease was taken or last renewed."""
    provider: Mapped[str | None] = mapped_column(String(100))
    model: Mapped[str | None] = mapped_column(String(200))
    fallback_from: Mapped[str | None] = mapped_column(String(300))
    input_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    output_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    cache_read_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    cache_write_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    cost_usd: Mapped[Decimal] = mapped_column(Numeric(14, 6), default=0, server_default="0")
    latency_ms: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[ErrorDoc | None] = mapped_column(JSONB)
    route: Mapped[JsonObject | None] = mapped_column(JSONB)
    """The router's decision (model, provider, tier, reason, rejected candidates, fallbacks)."""
    redactions: Mapped[dict[str, int] | None] = mapped_column(JSONB)
    """Values replaced before the call, counted per kind (never the values)."""
    open_calls: Mapped[int | None] = mapped_column(Integer)
    """A model step that asked for tools: its calls without a result yet (the result that
    brings it to 0 adds the turn's next model step)."""
    created_at: Mapped[datetime] = _now()
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Message(Base):
    __tablename__ = "messages"
    __table_args__ = (
        UniqueConstraint("session_id", "seq"),
        UniqueConstraint("step_id", "role"),
        Index(
            "uq_messages_user_per_turn",
            "turn_id",
            unique=True,
            postgresql_where=text("role = 'user'"),
        ),
        Index("ix_messages_turn_id", "turn_id"),
    )
    id: Mapped[uuid.UUID] = _pk()
    session_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text, default="")
    tool_calls: Mapped[list[Any] | None] = mapped_column(JSONB)
    tool_call_id: Mapped[str | None] = mapped_column(String(200))
    name: Mapped[str | None] = mapped_column(String(200))
    is_error: Mapped[bool] = mapped_column(Boolean, default=False, server_default="false")
    images: Mapped[list[Any] | None] = mapped_column(JSONB)
    """A user message's images (URLs), when it has any."""
    turn_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("turns.id", ondelete="CASCADE"))
    step_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("steps.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = _now()
    rolled_back: Mapped[bool] = mapped_column(Boolean, default=False, server_default="false")
    """The message left the history with its rolled-back turn (it is kept, never deleted)."""


class ToolCallRow(Base):
    __tablename__ = "tool_calls"
    __table_args__ = (
        UniqueConstraint("step_id", "call_id"),
        Index("ix_tool_calls_turn_id", "turn_id"),
        one_of("status", ToolCallStatus, table="tool_calls"),
        one_of("severity", ToolSeverity, table="tool_calls"),
    )
    id: Mapped[uuid.UUID] = _pk()
    turn_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("turns.id", ondelete="CASCADE"))
    step_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("steps.id", ondelete="CASCADE"))
    call_id: Mapped[str] = mapped_column(String(200))
    name: Mapped[str] = mapped_column(String(200))
    arguments: Mapped[JsonObject] = mapped_column(JSONB)
    status: Mapped[ToolCallStatus] = mapped_column(default=ToolCallStatus.PENDING)
    result: Mapped[str | None] = mapped_column(Text)
    is_error: Mapped[bool] = mapped_column(Boolean, default=False, server_default="false")
    truncated: Mapped[bool] = mapped_column(Boolean, default=False, server_default="false")
    severity: Mapped[ToolSeverity] = mapped_column(
        default=ToolSeverity.OK, server_default=ToolSeverity.OK.value
    )
    error_kind: Mapped[str | None] = mapped_column(String(32))
    latency_ms: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = _now()
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Decision(Base):
    """Append-only audit: one row per model call and per tool call."""

    __tablename__ = "decisions"
    __table_args__ = (
        one_of("kind", DecisionKind, table="decisions"),
        Index("ix_decisions_created", "tenant_id", "created_at"),
    )
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), index=True)
    session_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    turn_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    step_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    kind: Mapped[DecisionKind]
    name: Mapped[str] = mapped_column(String(200))
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    input: Mapped[JsonObject | None] = mapped_column(JSONB)
    output: Mapped[JsonObject | None] = mapped_column(JSONB)
    is_error: Mapped[bool] = mapped_column(Boolean, default=False)
    latency_ms: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = _now()


class Proposal(Base):
    """An action the model proposed (propose_action); only an operator's confirm executes it."""

    __tablename__ = "proposals"
    __table_args__ = (
        Index("ix_proposals_pending", "expires_at", postgresql_where=text("status = 'pending'")),
        Index("ix_proposals_turn_id", "turn_id"),
        one_of("status", ProposalStatus, table="proposals"),
    )
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    session_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), index=True
    )
    turn_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("turns.id", ondelete="CASCADE"))
    tool_call_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tool_calls.id", ondelete="CASCADE"), unique=True
    )
    action: Mapped[str] = mapped_column(String(200))
    product: Mapped[str] = mapped_column(String(200))
    params: Mapped[JsonObject] = mapped_column(JSONB, default=dict)
    rationale: Mapped[str] = mapped_column(Text)
    blast_radius: Mapped[str | None] = mapped_column(String(200))
    reversible: Mapped[bool | None] = mapped_column(Boolean)
    status: Mapped[ProposalStatus] = mapped_column(default=ProposalStatus.PENDING)
    created_at: Mapped[datetime] = _now()
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    execution_started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    executed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    outcome: Mapped[JsonObject | None] = mapped_column(JSONB)


class AgentTask(Base):
    """One call of an agent: a step-like durable record (lease, attempt, deadline)."""

    __tablename__ = "agent_tasks"
    __table_args__ = (
        Index(
            "ix_agent_tasks_open",
            "lease_until",
            postgresql_where=text("status IN ('submitted', 'working')"),
        ),
        one_of("status", TaskStatus, table="agent_tasks"),
    )
    id: Mapped[uuid.UUID] = _pk()
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    session_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), index=True
    )
    turn_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("turns.id", ondelete="CASCADE"))
    tool_call_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tool_calls.id", ondelete="CASCADE"), unique=True
    )
    call_id: Mapped[str] = mapped_column(String(200))
    step_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    step_attempt: Mapped[int] = mapped_column(Integer)
    model_step_no: Mapped[int] = mapped_column(Integer)
    agent: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(16))
    mode: Mapped[str] = mapped_column(String(16))
    status: Mapped[TaskStatus] = mapped_column(default=TaskStatus.SUBMITTED)
    input: Mapped[JsonObject | None] = mapped_column(JSONB)
    result: Mapped[Any] = mapped_column(JSONB, nullable=True)
    error: Mapped[ErrorDoc | None] = mapped_column(JSONB)
    progress: Mapped[TaskProgress | None] = mapped_column(JSONB)
    attempt: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    deadline: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    child_session_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    child_turn_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True), index=True)
    remote_task_id: Mapped[str | None] = mapped_column(String(200))
    follow_up_turn_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    created_at: Mapped[datetime] = _now()
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Worker(Base):
    """A worker process that holds (or may hold) leases; its heartbeat refreshes `seen_at`."""

    __tablename__ = "workers"
    holder: Mapped[str] = mapped_column(String(200), primary_key=True)
    hostname: Mapped[str] = mapped_column(String(200))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = _now()
    seen_at: Mapped[datetime] = _now()


# The tables themselves, for Core statements on the hot path (no ORM unit of work).
sessions_table = cast(Table, Session.__table__)
turns_table = cast(Table, Turn.__table__)
steps_table = cast(Table, Step.__table__)
messages_table = cast(Table, Message.__table__)
decisions_table = cast(Table, Decision.__table__)
tool_calls_table = cast(Table, ToolCallRow.__table__)
agent_tasks_table = cast(Table, AgentTask.__table__)
workers_table = cast(Table, Worker.__table__)


# Budget tables are declared in their own module, on the same metadata.
from . import budget_models as budget_models  # noqa: E402
from . import checkpoint_models as checkpoint_models  # noqa: E402
from . import intents as intents  # noqa: E402
from . import openai_models as openai_models  # noqa: E402
from . import parked_calls as parked_calls  # noqa: E402
