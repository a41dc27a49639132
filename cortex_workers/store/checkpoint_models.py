"""The checkpoints table (migration 0013): one row per turn that ended `done`.

Rows are written by the trigger `turns_done_checkpoint` in the statement that ends the turn,
with the session's rolling summary as it was then (the summary is versioned with its
checkpoint) and the seq of the last message the checkpoint covers.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import cast

from sqlalchemy import DateTime, ForeignKey, Index, Integer, Table, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from .models import Base


class Checkpoint(Base):
    __tablename__ = "checkpoints"
    __table_args__ = (Index("ix_checkpoints_session", "session_id", "turn_seq"),)
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    session_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    turn_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("turns.id", ondelete="CASCADE"), unique=True
    )
    turn_seq: Mapped[int] = mapped_column(Integer)
    parent_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("checkpoints.id", ondelete="SET NULL")
    )
    messages_upto_seq: Mapped[int] = mapped_column(Integer)
    summary: Mapped[str] = mapped_column(Text, default="", server_default="")
    summary_upto_seq: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


checkpoints_table = cast(Table, Checkpoint.__table__)
