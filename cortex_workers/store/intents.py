"""Tool intents (migration 0018): a call with side effects is recorded, and committed, before
it is sent; a takeover that finds the record knows the call may already have happened.

`record_intent` is one autocommitted statement on a tool step whose tool has effects outside
our database; a read-only tool, a built-in tool and a model step never reach it.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Integer, String, func
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Mapped, mapped_column

from .models import Base


class ToolIntent(Base):
    """One tool call with side effects that was about to be sent (and how often)."""

    __tablename__ = "tool_intents"
    tool_call_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tool_calls.id", ondelete="CASCADE"), primary_key=True
    )
    idempotency_key: Mapped[str] = mapped_column(String(80))
    attempt: Mapped[int] = mapped_column(Integer)
    """The step attempt that last recorded it."""
    sends: Mapped[int] = mapped_column(Integer, server_default="1")
    """How many attempts recorded it: more than one means a takeover found it."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


def record_intent(
    db: Connection, tool_call_id: uuid.UUID, *, idempotency_key: str, attempt: int
) -> int:
    """Record that attempt `attempt` is about to send the call; returns how many attempts have
    (1: this is the first, so nothing was sent before)."""
    stmt = insert(ToolIntent).values(
        tool_call_id=tool_call_id, idempotency_key=idempotency_key, attempt=attempt, sends=1
    )
    upsert = stmt.on_conflict_do_update(
        index_elements=[ToolIntent.tool_call_id],
        set_={"sends": ToolIntent.sends + 1, "attempt": attempt},
        where=ToolIntent.attempt < attempt,  # a redelivery of the same attempt adds nothing
    ).returning(ToolIntent.sends)
    sends = db.execute(upsert).scalar_one_or_none()
    return 2 if sends is None else int(sends)
