"""The client side of the Tasks extension (`io.modelcontextprotocol/tasks`, docs/mcp.md,
"Tools that answer with a task"), as the extension's specification and our own server
(`api/mcp_tasks.py`) speak it.

A `tools/call` of a tool step declares the extension (`Tasks`); a server may then answer with
a task handle (`resultType: "task"`) instead of the result. The SDK hands a claimed result to
the claim's resolver, which here raises `TaskStarted` with the handle: the call does not wait,
the tool step is parked, and later polls send `tasks/get` (`get_task`) until the task has
ended: `completed` with the call's result inlined, `failed` with a JSON-RPC error, or
`cancelled`. `tasks/cancel` is sent when nobody waits for the result any more.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp_types import (
    CallToolResult,
    CancelTaskRequestParams,
    EmptyResult,
    GetTaskRequestParams,
    Request,
    Result,
)
from pydantic import Field

from ..messages import JsonObject

TASKS = "io.modelcontextprotocol/tasks"
TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]


TASK_ID_MAX = 500
"""The longest task id a server may hand out (its column's size); a longer one, or an empty
one, makes the answer invalid: the call ends with an error result."""


class TaskHandle(Result):
    """A call's answer as a task (the extension's `CreateTaskResult`)."""

    result_type: Literal["task"] = "task"
    task_id: str = Field(min_length=1, max_length=TASK_ID_MAX)
    status: str
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = Field(default=None, ge=0)
    poll_interval_ms: int | None = Field(default=None, ge=0)


class TaskDoc(Result):
    """What `tasks/get` answers (the extension's `DetailedTask`)."""

    task_id: str
    status: TaskStatus
    status_message: str | None = None
    poll_interval_ms: int | None = None
    result: JsonObject | None = None
    error: JsonObject | None = None


class TaskStarted(Exception):
    """The server answered the call with a task (carried as `handle`)."""

    def __init__(self, handle: TaskHandle) -> None:
        super().__init__(f"task {handle.task_id}")
        self.handle = handle


class GetTask(Request[GetTaskRequestParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: GetTaskRequestParams
    name_param = "taskId"  # the extension's `Mcp-Name` routing header


class CancelTask(Request[CancelTaskRequestParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: CancelTaskRequestParams
    name_param = "taskId"


async def _started(handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
    raise TaskStarted(handle)


class Tasks(ClientExtension):
    """The extension as a tool step's client declares it: a task handle is not waited for."""

    identifier = TASKS

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=_started)]


async def get_task(client: Client, task_id: str) -> TaskDoc:
    request = GetTask(params=GetTaskRequestParams(task_id=task_id))
    return await client.session.send_request(request, TaskDoc)


async def cancel_task(client: Client, task_id: str) -> None:
    request = CancelTask(params=CancelTaskRequestParams(task_id=task_id))
    await client.session.send_request(request, EmptyResult)
