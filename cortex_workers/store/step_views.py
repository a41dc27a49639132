"""What a step reads with its claim (store/claims.py): a model step's turn, session and
history window, a tool step's call and session."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, TypedDict

from ..messages import JsonObject
from .agent_tasks import EndedTaskDoc
from .models import TurnTrigger
from .replies import ToolCallDoc
from .whiteboard import BoardDoc


class HistoryEntry(TypedDict):
    """One message of a model step's history, as the view reads it (`_HISTORY_COLUMNS`)."""

    role: str
    content: str
    tool_calls: list[ToolCallDoc] | None
    """As the assistant message stored them."""
    tool_call_id: str | None
    name: str | None
    is_error: bool
    images: list[str] | None


class BatchCall(TypedDict):
    """A tool call of the model step before this one, with its result (`tool_calls` row)."""

    call_id: str
    name: str
    status: str
    result: str | None
    is_error: bool
    truncated: bool
    severity: str
    error_kind: str | None


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
    session_metadata: JsonObject | None
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
    session_route: JsonObject | None = None
    turn_route: JsonObject | None = None
    """The route requests of the session and of the turn (`routing.RouteSpec`), if any."""
    turn_options: JsonObject | None = None
    """What the turn asks of its model calls (`turns.options.TurnOptions`), if anything."""
    tenant_daily_micros: int | None = None
    tenant_session_cap: int | None = None
    tenant_user_hourly: int | None = None
    """The tenant's own limits (None: the configured ones apply)."""
    user: str | None = None
    """The turn's end user, else the session's."""
    session_tokens: int = 0
    """Tokens the session has used so far."""
    agents: list[str] | None = None
    """The session's agents, offered as `<name>_agent` tools."""
    trigger: TurnTrigger | None = None
    """What started a turn no user posted (`{"kind": "task", "task_id"}`)."""
    parent_session_id: uuid.UUID | None = None
    board: BoardDoc | None = None
    """The session's whiteboard (`store.whiteboard.board_view`), None without one."""
    parent_board: BoardDoc | None = None
    """A sub-agent's: its parent session's whiteboard."""
    task: EndedTaskDoc | None = None
    """A follow-up turn's: the ended task it answers."""
    tool_counts: dict[str, int] | None = None
    """The turn's calls per tool, when a limit on them may apply."""
    batch: list[BatchCall] | None = None
    """The tool calls of the model step before this one, with their results."""
    retried: list[int] | None = None
    """The steps of the turn that a recovery `retry` ran again, when that action is set."""

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
            turn_options=row.turn_options,
            tenant_daily_micros=row.tenant_daily_micros,
            tenant_session_cap=row.tenant_session_cap,
            tenant_user_hourly=row.tenant_user_hourly,
            user=row.turn_user if row.turn_user is not None else row.session_user,
            session_tokens=int(row.session_tokens or 0),
            agents=row.agents,
            trigger=row.turn_trigger,
            parent_session_id=row.parent_session_id,
            board=row.board,
            parent_board=row.parent_board,
            task=row.task,
            tool_counts=row.tool_counts,
            batch=row.batch,
            retried=row.retried,
        )


@dataclass(frozen=True, slots=True)
class ToolStepView:
    """What a tool step reads about its call and session with its claim."""

    call_id: str
    name: str
    arguments: JsonObject
    session_id: uuid.UUID
    session_name: str | None
    tenant_id: uuid.UUID
    allowed: list[str] | None
    """The session's tools."""
    tenant_name: str | None
    parent_no: int
    """The step_no of the model step that asked for the call."""
    same_arguments: int = 0
    """Earlier calls of the turn to the same tool with the same arguments."""
    same_tool: int = 0
    """Earlier calls of the turn to the same tool."""
    open_siblings: int = 0
    """Calls of the same batch, earlier in it, not finished yet."""
    session_metadata: JsonObject | None = None

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
            tenant_name=row.tenant_name,
            parent_no=row.parent_no,
            same_arguments=row.same_arguments,
            same_tool=row.same_tool,
            open_siblings=row.open_siblings,
            session_metadata=row.session_metadata,
        )
