"""The tables of the OpenAI-compatible API (migration 0017): a response is a turn, a
conversation is a session; these rows hold only what OpenAI's shapes add to them.

- `openai_responses`: one row per turn created through `POST /v1/responses`, with the request
  as OpenAI's fields (echoed back on the response) and whether it was deleted.
- `openai_conversations`: one row per session created as a conversation, with OpenAI's
  `metadata` (string values; a session's own `metadata` drives the scripted provider).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import cast

from sqlalchemy import Boolean, DateTime, ForeignKey, Index, Table, func
from sqlalchemy.orm import Mapped, mapped_column

from ..messages import JsonObject
from .models import Base


class OpenAIResponse(Base):
    __tablename__ = "openai_responses"
    __table_args__ = (Index("ix_openai_responses_session", "session_id"),)
    turn_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("turns.id", ondelete="CASCADE"), primary_key=True
    )
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    session_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    conversation: Mapped[bool] = mapped_column(Boolean, default=False, server_default="false")
    """The session is a conversation (else the hidden session of a response chain)."""
    previous_response_id: Mapped[uuid.UUID | None] = mapped_column()
    request: Mapped[JsonObject] = mapped_column()
    """OpenAI's request fields as accepted (model, instructions, metadata, background, input)."""
    deleted: Mapped[bool] = mapped_column(Boolean, default=False, server_default="false")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class OpenAIConversation(Base):
    __tablename__ = "openai_conversations"
    session_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True
    )
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), index=True
    )
    metadata_: Mapped[JsonObject] = mapped_column("metadata", default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


openai_responses_table = cast(Table, OpenAIResponse.__table__)
openai_conversations_table = cast(Table, OpenAIConversation.__table__)
