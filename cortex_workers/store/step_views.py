"""What a step reads with its claim (store/claims.py): a model step's turn, session and
history window, a tool step's call and session."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, TypedDict

from .replies import ToolCallDoc


class HistoryEntry(TypedDict):
    """One message of a model step's history, as the view reads it (`_HISTORY_COLUMNS`)."""

    role: str
    content: str
    tool_calls: list[ToolCallDoc] | None
    """As the assistant message stored them."""
    tool_call_id: str | None
    name: str | None
    is_error: bool


@dataclass(frozen=True, slots=True)
class ModelStepView:
    """What a model step reads about its turn and session with its claim."""

    session_id: uuid.UUID
    tenant_id: uuid.UUID
    model_steps: int
    """The turn's model steps stored so far."""
    system_prompt: str | None
    provider: str | None
    model: str | None
    tools: list[str] | None
    """The session's tools (None: every registered tool)."""
    session_metadata: dict[str, Any] | None
    summary: str
    summary_upto_seq: int
    last_message_seq: int
    user_seq: int | None
    """The seq of the turn's user message."""
    parent_step_no: int | None
    history: list[HistoryEntry]
    """The messages the model sees, oldest first: the last `window` after the summary, and
    always the whole turn."""
    session_mode: str | None = None
    tenant_mode: str | None = None
    session_route: dict[str, Any] | None = None
    turn_route: dict[str, Any] | None = None
    """The route requests of the session and of the turn (`routing.RouteSpec`), if any."""

    @classmethod
    def of(cls, row: Any) -> ModelStepView:
        return cls(
            session_id=row.session_id,
            tenant_id=row.tenant_id,
            model_steps=row.model_steps,
            system_prompt=row.system_prompt,
            provider=row.provider,
            model=row.model,
            tools=row.tools,
            session_metadata=row.session_metadata,
            summary=row.summary,
            summary_upto_seq=row.summary_upto_seq,
            last_message_seq=row.last_message_seq,
            user_seq=row.user_seq,
            parent_step_no=row.parent_step_no,
            history=row.history or [],
            session_mode=row.session_mode,
            tenant_mode=row.tenant_mode,
            session_route=row.session_route,
            turn_route=row.turn_route,
        )


@dataclass(frozen=True, slots=True)
class ToolStepView:
    """What a tool step reads about its call and session with its claim."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    session_id: uuid.UUID
    session_name: str | None
    tenant_id: uuid.UUID
    allowed: list[str] | None
    """The session's tools."""
    parent_no: int
    """The step_no of the model step that asked for the call."""

    @classmethod
    def of(cls, row: Any) -> ToolStepView:
        return cls(
            call_id=row.call_id,
            name=row.name,
            arguments=row.arguments,
            session_id=row.session_id,
            session_name=row.session_name,
            tenant_id=row.tenant_id,
            allowed=row.allowed,
            parent_no=row.parent_no,
        )
