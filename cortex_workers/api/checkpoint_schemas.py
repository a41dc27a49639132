"""Bodies and responses of checkpoints, rollback, fork and regenerate."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class CheckpointOut(BaseModel):
    id: uuid.UUID
    turn_id: uuid.UUID
    turn_seq: int
    parent_id: uuid.UUID | None
    created_at: datetime
    messages_upto_seq: int


class CheckpointList(BaseModel):
    checkpoints: list[CheckpointOut] = Field(description="Oldest first.")


class RollbackIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    to: uuid.UUID | None = Field(
        description="The turn whose checkpoint the session returns to; null for its start."
    )
    if_busy: Literal["reject", "interrupt"] = Field(
        default="reject",
        description="`reject`: 409 session_busy while a turn is active or queued; "
        "`interrupt`: cancel them, then roll back.",
    )


class RollbackOut(BaseModel):
    session_id: uuid.UUID
    to: uuid.UUID | None
    rolled_back_turns: int = Field(description="Turns this call moved to `rolled_back`.")


class ForkIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    at: uuid.UUID = Field(description="The turn whose checkpoint the fork starts from.")
    name: str | None = Field(default=None, max_length=200)


class ForkedFrom(BaseModel):
    session_id: uuid.UUID
    turn_id: uuid.UUID
