"""The Tasks extension (`io.modelcontextprotocol/tasks`) on `/mcp` (docs/mcp.md), on the
SDK's extension mechanism.

A call of `ask` or of an agent's tool from a client that declares the extension answers with
a task (`resultType: "task"`) when its turn has not ended within the call's wait, instead of
the turn's status. The task is the turn: its id is the turn's id and its state is the turn's
row in Postgres, so `tasks/get` and `tasks/cancel` are answered by any API replica, also after
a restart, for the tenant whose key asks.

- `tasks/get`: `working` while the turn is queued or running; `completed` once it has ended,
  with the result the call would have returned (an agent that failed: an `isError` result);
  `cancelled` for a cancelled turn.
- `tasks/update`: an empty acknowledgement (a turn never asks its client for input).
- `tasks/cancel`: cancels the turn; an empty acknowledgement, also for a turn that had ended.

An unknown task id is the error -32602; a client that does not declare the extension on its
request gets -32021 for the three methods, and never a task from a call.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypedDict

from fastapi import HTTPException
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import Context, require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    CallToolRequestParams,
    CallToolResult,
    RequestParams,
    TextContent,
)
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from starlette.concurrency import run_in_threadpool

from ..dispatch import publish
from ..errors import ConflictError, NotFound
from ..messages import ErrorDoc, JsonObject
from ..runtime import Runtime, get_runtime
from ..store import repo
from ..store.db import transaction
from ..turns.submit import cancel_turn
from ..vocabulary import TurnStatus
from .deps import tenant_of_key
from .views import turn_out

TASKS = "io.modelcontextprotocol/tasks"
POLL_INTERVAL_MS = 1000
TASK_AFTER_S = 2.0
"""How long an agent's tool waits for its answer before it is a task, for a client that
declares the extension (`ask` waits its `wait_s`)."""
WORKING = {TurnStatus.QUEUED, TurnStatus.RUNNING}


class TurnAnswer(TypedDict):
    """What `ask`, `turn_status` and an agent's tool answer: the turn's status and answer."""

    turn_id: str
    session_id: str
    status: str
    answer: str | None
    error: ErrorDoc | None


class TaskState(BaseModel):
    """A turn as a task (the extension's `DetailedTask`), camelCase on the wire."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)
    task_id: str
    status: Literal["working", "completed", "cancelled"]
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    """None: no retention is configured (null on the wire, not left out)."""
    poll_interval_ms: int = POLL_INTERVAL_MS
    result: JsonObject | None = None

    def wire(self) -> JsonObject:
        doc = self.model_dump(by_alias=True, mode="json", exclude_none=True)
        doc["ttlMs"] = self.ttl_ms
        return doc


class TaskParams(RequestParams):
    """`tasks/get` and `tasks/cancel`: the task's id."""

    task_id: str


class UpdateParams(TaskParams):
    """`tasks/update`: the task's id and the client's answers (never asked for here)."""

    input_responses: JsonObject = Field(default_factory=dict)


def tool_result(status: TurnAnswer, *, agent: bool) -> CallToolResult:
    """What a call of `ask` (or of an agent's tool, `agent`) returns for the turn's status."""
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(status))],
        structured_content={**status},
        is_error=agent and status["status"] == TurnStatus.FAILED,
    )


class TurnTasks(Extension):
    """The Tasks extension, over turns (see the module's doc)."""

    identifier = TASKS

    def __init__(self, turn_tools: Sequence[str], is_agent_tool: Callable[[str], bool]) -> None:
        self._turn_tools = frozenset(turn_tools)
        self._is_agent_tool = is_agent_tool

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("tasks/get", TaskParams, self._get),
            MethodBinding("tasks/update", UpdateParams, self._update),
            MethodBinding("tasks/cancel", TaskParams, self._cancel),
        )

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        """The call as the tool answers it; a turn still going on becomes a task when the
        client declared the extension."""
        result = await call_next(ctx)
        if not _declared(ctx) or not (
            params.name in self._turn_tools or self._is_agent_tool(params.name)
        ):
            return result
        if not isinstance(result, CallToolResult) or result.is_error:
            return result
        status = result.structured_content
        if not status or status.get("status") not in WORKING:
            return result
        tenant_id = await _tenant(ctx)
        turn_id = uuid.UUID(str(status["turn_id"]))
        task = await run_in_threadpool(_task, get_runtime(), tenant_id, turn_id)
        return {**task.wire(), "resultType": "task"}

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> HandlerResult:
        require_client_extension(ctx, TASKS)
        tenant_id = await _tenant(ctx)
        task_id = _turn_id(params.task_id)
        return (await run_in_threadpool(_task, get_runtime(), tenant_id, task_id)).wire()

    async def _update(
        self, ctx: ServerRequestContext[Any, Any], params: UpdateParams
    ) -> HandlerResult:
        require_client_extension(ctx, TASKS)
        tenant_id = await _tenant(ctx)
        await run_in_threadpool(_task, get_runtime(), tenant_id, _turn_id(params.task_id))
        return {}  # no input is ever outstanding: the answers are ignored, as the spec asks

    async def _cancel(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> HandlerResult:
        require_client_extension(ctx, TASKS)
        tenant_id = await _tenant(ctx)
        await run_in_threadpool(_cancel, get_runtime(), tenant_id, _turn_id(params.task_id))
        return {}


def declares_tasks(ctx: Context[Any, Any]) -> bool:
    """Whether the client declared the extension on this request (a tool's context)."""
    capabilities = ctx.client_capabilities
    return bool(capabilities and capabilities.extensions and TASKS in capabilities.extensions)


def _declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    capabilities = ctx.session.client_capabilities
    return bool(capabilities and capabilities.extensions and TASKS in capabilities.extensions)


async def _tenant(ctx: ServerRequestContext[Any, Any]) -> uuid.UUID:
    headers = getattr(ctx.request, "headers", None) or {}
    _, _, key = (headers.get("authorization") or "").partition(" ")
    try:
        return await tenant_of_key(get_runtime(), key.strip())
    except HTTPException as exc:  # the routes' 401, as an MCP error
        raise MCPError(code=INVALID_REQUEST, message=f"unauthorized: {exc.detail}") from None


def _turn_id(task_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(task_id)
    except ValueError:
        raise _not_found() from None


def _not_found() -> MCPError:
    return MCPError(code=INVALID_PARAMS, message="Failed to retrieve task: Task not found")


def _task(rt: Runtime, tenant_id: uuid.UUID, turn_id: uuid.UUID) -> TaskState:
    """The turn as a task."""
    with transaction(rt.db) as db:
        turn = repo.get_turn(db, turn_id, tenant_id=tenant_id)
        if turn is None:
            raise _not_found()
        out = turn_out(db, turn)
        agent = bool((turn.options or {}).get("agent_call"))
        created, updated = turn.created_at, turn.finished_at or turn.started_at or turn.created_at
    status = TurnAnswer(
        turn_id=str(out.id),
        session_id=str(out.session_id),
        status=str(out.status),
        answer=out.answer,
        error=out.error,
    )
    days = rt.settings.retention_days
    task = TaskState(
        task_id=str(turn_id),
        status="working",
        created_at=created.isoformat(),
        last_updated_at=updated.isoformat(),
        ttl_ms=None if days is None else int(days * 86_400_000),
    )
    match out.status:
        case TurnStatus.QUEUED | TurnStatus.RUNNING:
            return task.model_copy(update={"status_message": f"the turn is {out.status}"})
        case TurnStatus.CANCELLED:
            message = "the turn was cancelled"
            return task.model_copy(update={"status": "cancelled", "status_message": message})
        case _:
            result = tool_result(status, agent=agent)
            dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
            return task.model_copy(update={"status": "completed", "result": dumped})


def _cancel(rt: Runtime, tenant_id: uuid.UUID, turn_id: uuid.UUID) -> None:
    try:
        _, started = cancel_turn(rt, tenant_id=tenant_id, turn_id=turn_id)
    except NotFound:
        raise _not_found() from None
    except ConflictError:  # it had ended: acknowledged all the same
        return
    publish(started)
