"""Responses in OpenAI's shape, built with the official SDK's own types from a turn and its
response row."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi.responses import JSONResponse
from openai.types.responses import (
    FunctionTool,
    Response,
    ResponseError,
    ResponseFunctionToolCall,
    ResponseOutputItem,
    ResponseOutputMessage,
    ResponseOutputRefusal,
    ResponseOutputText,
    ResponseUsage,
)
from openai.types.responses.mcp_tool_call_error import McpToolExecutionError
from openai.types.responses.response import Conversation, IncompleteDetails
from openai.types.responses.response_output_item import McpCall
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from pydantic import BaseModel
from sqlalchemy.orm import Session as Db

from ...errors import NotFound
from ...messages import JsonObject
from ...store import openai_records, repo
from ...store import steps as step_store
from ...store.models import Turn
from ...store.openai_models import OpenAIResponse
from ...store.replies import ToolCallDoc
from ...turns.options import CUT_OFF
from ...vocabulary import TurnStatus
from . import ids

SERVER_LABEL = "cortex"
"""The `server_label` of the operator's tools' calls (`mcp_call` items)."""

Status = Literal["completed", "failed", "in_progress", "cancelled", "queued", "incomplete"]
STATUSES: dict[TurnStatus, Status] = {
    TurnStatus.QUEUED: "queued",
    TurnStatus.RUNNING: "in_progress",
    TurnStatus.DONE: "completed",
    TurnStatus.FAILED: "failed",
    TurnStatus.CANCELLED: "cancelled",
    TurnStatus.ROLLED_BACK: "completed",
}


@dataclass(frozen=True, slots=True)
class Answer:
    """A model step's stored answer: its text and the function calls it made."""

    step: int
    text: str
    calls: list[ToolCallDoc]


@dataclass(frozen=True, slots=True)
class Result:
    """What one of the operator's tools answered a call of the turn."""

    content: str
    is_error: bool


@dataclass(frozen=True, slots=True)
class Loaded:
    """A response row, its turn, the turn's answers and tool results, and cached tokens."""

    record: OpenAIResponse
    turn: Turn
    answers: list[Answer]
    cached_tokens: int = 0
    results: dict[str, Result] = field(default_factory=dict)
    """Call id → result, for the calls the operator's tools ran."""

    @property
    def request(self) -> dict[str, Any]:
        return self.record.request

    @property
    def client_tools(self) -> frozenset[str]:
        """The names of the response's `function` tools (the client runs their calls)."""
        return client_tools(self.request.get("tools") or [])


def client_tools(tools: list[JsonObject]) -> frozenset[str]:
    """The names of the `function` tools among a response's stored `tools`."""
    return frozenset(str(t["name"]) for t in tools if t.get("type") == "function")


def load(db: Db, response_id: str, tenant_id: uuid.UUID, *, deleted_too: bool = False) -> Loaded:
    """The tenant's response `response_id`; 404 for an unknown, deleted (unless
    `deleted_too`: a response not stored, to its own request) or foreign one."""
    turn_id = ids.parse(response_id, ids.RESPONSE, "response")
    found = openai_records.response_and_turn(db, turn_id, tenant_id, deleted_too=deleted_too)
    if found is None:
        raise NotFound(f"response {response_id!r} not found", code="response_not_found")
    record, turn = found
    steps = step_store.steps_of_turn(db, turn_id)
    numbers = {s.id: s.step_no for s in steps}
    messages = repo.turn_messages(db, turn_id)
    answers = [
        Answer(
            numbers.get(m.step_id, m.seq) if m.step_id else m.seq,
            m.content,
            list(m.tool_calls or ()),
        )
        for m in messages
        if m.role == "assistant" and (m.content or m.tool_calls)
    ]
    results = {
        m.tool_call_id: Result(m.content, m.is_error)
        for m in messages
        if m.role == "tool" and m.tool_call_id
    }
    return Loaded(record, turn, answers, sum(s.cache_read_tokens for s in steps), results)


def output_message(
    turn_id: uuid.UUID,
    step: int,
    text: str,
    *,
    status: Literal["in_progress", "completed", "incomplete"],
) -> ResponseOutputMessage:
    parts: list[ResponseOutputText | ResponseOutputRefusal] = [
        ResponseOutputText(type="output_text", text=text, annotations=[])
    ]
    return ResponseOutputMessage(
        id=ids.output_item_id(turn_id, step),
        type="message",
        role="assistant",
        status=status,
        content=parts if text or status != "in_progress" else [],
    )


def function_call(turn_id: uuid.UUID, call: ToolCallDoc) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=ids.call_item_id(turn_id, call["id"]),
        type="function_call",
        call_id=call["id"],
        name=call["name"],
        arguments=json.dumps(call["arguments"]),
        status="completed",
    )


def server_call(turn_id: uuid.UUID, call: ToolCallDoc, result: Result | None) -> McpCall:
    """A call of one of the operator's tools (`cortex_tools`), run server-side: an
    `mcp_call` item of the server `cortex` (in progress until its result is stored)."""
    status: Literal["in_progress", "completed", "failed"] = "in_progress"
    if result is not None:
        status = "failed" if result.is_error else "completed"
    return McpCall(
        id=ids.server_call_item_id(turn_id, call["id"]),
        type="mcp_call",
        server_label=SERVER_LABEL,
        name=call["name"],
        arguments=json.dumps(call["arguments"]),
        output=result.content if result is not None and not result.is_error else None,
        error=McpToolExecutionError(type="mcp_tool_execution_error", content=result.content)
        if result is not None and result.is_error
        else None,
        status=status,
    )


def output_items(loaded: Loaded) -> list[ResponseOutputItem]:
    """Each answer's message (when it has text), then its calls: `function_call` items for
    the client's tools, `mcp_call` items for the operator's."""
    turn_id, client = loaded.turn.id, loaded.client_tools
    out: list[ResponseOutputItem] = []
    for answer in loaded.answers:
        if answer.text:
            out.append(output_message(turn_id, answer.step, answer.text, status="completed"))
        for call in answer.calls:
            if call["name"] in client:
                out.append(function_call(turn_id, call))
            else:
                out.append(server_call(turn_id, call, loaded.results.get(call["id"])))
    return out


def cut_off(turn: Turn) -> bool:
    """Whether the turn's answer stopped at its output token limit (`incomplete`)."""
    return any(w.get("code") == CUT_OFF for w in turn.warnings or ())


def usage_of(turn: Turn, cached_tokens: int) -> ResponseUsage:
    return ResponseUsage(
        input_tokens=turn.input_tokens,
        input_tokens_details=InputTokensDetails(cached_tokens=cached_tokens, cache_write_tokens=0),
        output_tokens=turn.output_tokens,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        total_tokens=turn.input_tokens + turn.output_tokens,
    )


def response_of(loaded: Loaded, *, status: Status | None = None, empty: bool = False) -> Response:
    """The response as OpenAI's API shows it; `status` and `empty` give its first snapshot
    (as `response.created` carries it) instead of its state now."""
    turn, request = loaded.turn, loaded.request
    current = status or STATUSES[turn.status]
    if current == "completed" and status is None and cut_off(turn):
        current = "incomplete"
    ended = current in ("completed", "failed", "cancelled", "incomplete")
    error = None
    if current == "failed" and turn.error:
        error = ResponseError(code="server_error", message=str(turn.error.get("message", "")))
    conversation = None
    if loaded.record.conversation:
        conversation = Conversation(id=ids.conversation_id(loaded.record.session_id))
    previous = loaded.record.previous_response_id
    return Response(
        id=ids.response_id(turn.id),
        object="response",
        created_at=turn.created_at.timestamp(),
        completed_at=turn.finished_at.timestamp()
        if turn.finished_at and current == "completed"
        else None,
        status=current,
        model=request["model"],
        output=[] if empty else output_items(loaded),
        instructions=request.get("instructions"),
        metadata=request.get("metadata") or {},
        parallel_tool_calls=request.get("parallel_tool_calls", True),
        tool_choice=request.get("tool_choice") or "auto",
        tools=[FunctionTool.model_validate(t) for t in request.get("tools") or ()],
        temperature=request.get("temperature"),
        max_output_tokens=request.get("max_output_tokens"),
        text=request.get("text"),
        top_p=None,
        background=request.get("background", False),
        previous_response_id=ids.response_id(previous) if previous else None,
        conversation=conversation,
        usage=usage_of(turn, loaded.cached_tokens) if ended and not empty else None,
        error=error if not empty else None,
        incomplete_details=IncompleteDetails(reason="max_output_tokens")
        if current == "incomplete"
        else None,
        user=request.get("user"),
    )


def list_page(items: Sequence[BaseModel], *, has_more: bool) -> JSONResponse:
    """OpenAI's list page: `data`, `first_id`, `last_id`, `has_more`."""
    ids_of = [getattr(i, "id", None) for i in items]
    return JSONResponse(
        {
            "object": "list",
            "data": [i.model_dump(mode="json") for i in items],
            "first_id": ids_of[0] if items else None,
            "last_id": ids_of[-1] if items else None,
            "has_more": has_more,
        }
    )
