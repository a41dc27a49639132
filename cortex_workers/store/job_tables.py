"""Tables of LLM-function jobs and their batches (migration 0010; docs/jobs.md)."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    DateTime,
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
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from ..messages import ErrorDoc, JsonObject
from ..vocabulary import BatchStatus, JobStatus
from .models import Base, one_of


class Batch(Base):
    """Many jobs with one instruction and schema; its counts are kept as its jobs end."""

    __tablename__ = "batches"
    __table_args__ = (one_of("status", BatchStatus, table="batches"),)
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), index=True
    )
    status: Mapped[BatchStatus] = mapped_column(default=BatchStatus.RUNNING)
    count: Mapped[int] = mapped_column(Integer)
    succeeded: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    failed: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Job(Base):
    """One model call whose answer must be JSON valid against `result_schema`; retried with
    the validation error fed back up to `max_attempts`. `attempt` fences a claimed run."""

    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("batch_id", "batch_index"),
        Index(
            "ix_jobs_open",
            "updated_at",
            postgresql_where=text("status IN ('queued', 'running')"),
        ),
        one_of("status", JobStatus, table="jobs"),
    )
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), index=True
    )
    batch_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("batches.id", ondelete="CASCADE"))
    batch_index: Mapped[int | None] = mapped_column(Integer)
    status: Mapped[JobStatus] = mapped_column(default=JobStatus.QUEUED)
    instructions: Mapped[str] = mapped_column(Text)
    input: Mapped[Any] = mapped_column(JSONB)
    result_schema: Mapped[JsonObject]
    provider: Mapped[str | None] = mapped_column(String(100))
    model: Mapped[str | None] = mapped_column(String(200))
    max_attempts: Mapped[int] = mapped_column(Integer)
    metadata_: Mapped[JsonObject] = mapped_column(
        "metadata", JSONB, default=dict, server_default="{}"
    )
    attempt: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Runs claimed so far (each may make several model calls)."""
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    result: Mapped[Any | None] = mapped_column(JSONB)
    attempts: Mapped[list[Any]] = mapped_column(JSONB, default=list, server_default="[]")
    """Each model call: `{"n", "output", "error", "input_tokens", "output_tokens"}`."""
    error: Mapped[ErrorDoc | None] = mapped_column(JSONB)
    input_tokens: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    output_tokens: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    cost_usd: Mapped[Decimal] = mapped_column(Numeric(14, 6), default=0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


batches_table = cast(Table, Batch.__table__)
jobs_table = cast(Table, Job.__table__)
