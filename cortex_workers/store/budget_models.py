"""Tables of budgets: the counters every reservation goes through, and the reservations.

`budget_counters` holds one row per scope and window (`global` and `tenant:ID` per day in the
budget timezone, `session:ID` for a session's whole life): what was spent, what is reserved by
calls in flight, the limit in force and when its alert fired. Amounts are integer micro-dollars
(tokens for a session). `budget_reservations` holds one row per model call attempt, of a turn's
step or of an LLM-function job (exactly one of the two).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import cast

from sqlalchemy import (
    ARRAY,
    BigInteger,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from ..vocabulary import ReservationStatus
from .models import Base, one_of


class BudgetCounter(Base):
    """Spent and reserved amounts of one scope in one window."""

    __tablename__ = "budget_counters"
    scope: Mapped[str] = mapped_column(String(120), primary_key=True)
    window_start: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    resets_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    limit_amount: Mapped[int | None] = mapped_column(BigInteger)
    """The limit in force at the last reservation (None: unlimited, only counted)."""
    spent: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    reserved: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    alerted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class BudgetReservation(Base):
    """The maximum cost of one model call attempt, held until the call is settled."""

    __tablename__ = "budget_reservations"
    __table_args__ = (
        Index("uq_budget_reservations_call", "step_id", "attempt", "call_no", unique=True),
        Index("uq_budget_reservations_job_call", "job_id", "attempt", "call_no", unique=True),
        CheckConstraint(
            "(job_id IS NULL AND step_id IS NOT NULL AND turn_id IS NOT NULL "
            "AND session_id IS NOT NULL) "
            "OR (job_id IS NOT NULL AND step_id IS NULL AND turn_id IS NULL "
            "AND session_id IS NULL)",
            name="ck_budget_reservations_owner",
        ),
        Index(
            "ix_budget_reservations_open",
            "created_at",
            postgresql_where=text("status = 'reserved'"),
        ),
        Index("ix_budget_reservations_tenant", "tenant_id", "created_at"),
        one_of("status", ReservationStatus, table="budget_reservations"),
    )
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    step_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("steps.id", ondelete="CASCADE"))
    """The turn's step whose call this is (with its turn and session), or None for a job's."""
    job_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    """The LLM-function job whose call this is, or None for a step's."""
    attempt: Mapped[int] = mapped_column(Integer)
    """The step's attempt, or the job's run, that made the call."""
    call_no: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """A step's: 0 for the attempt's call, 1 for a second one (frugal's escalation). A
    job's: the call's number (from 1)."""
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    session_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE")
    )
    turn_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("turns.id", ondelete="CASCADE"))
    user: Mapped[str | None] = mapped_column(String(200))
    provider: Mapped[str] = mapped_column(String(100))
    model: Mapped[str] = mapped_column(String(200))
    day_start: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    """The window of the money scopes it was reserved in (settled there, even after midnight)."""
    status: Mapped[ReservationStatus] = mapped_column(default=ReservationStatus.RESERVED)
    amount_micros: Mapped[int] = mapped_column(BigInteger)
    tokens: Mapped[int] = mapped_column(BigInteger)
    """Tokens held against the session's cap (input bound plus max_tokens)."""
    cost_micros: Mapped[int | None] = mapped_column(BigInteger)
    input_tokens: Mapped[int | None] = mapped_column(Integer)
    output_tokens: Mapped[int | None] = mapped_column(Integer)
    settled_by: Mapped[str | None] = mapped_column(String(32))
    """`call` (its real cost), `failure` or `reconciler` (the reserved amount)."""
    scopes: Mapped[list[str] | None] = mapped_column(ARRAY(Text))
    """The counters it took (`global`, `tenant:ID`, `session:ID`): the scopes with a limit.
    The others are counted only when the call is settled."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    settled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


counters_table = cast(Table, BudgetCounter.__table__)
reservations_table = cast(Table, BudgetReservation.__table__)
