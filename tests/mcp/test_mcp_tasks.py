"""The Tasks extension on our `/mcp` (docs/mcp.md), with the official `mcp` SDK's client
declaring it: a long `ask` answers with a task, whose state is the turn's in Postgres, so a
second API process answers `tasks/get` and `tasks/cancel`."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any, Literal

import httpx
import pytest
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolResult,
    CancelTaskRequest,
    CancelTaskRequestParams,
    EmptyResult,
    GetTaskRequest,
    GetTaskRequestParams,
    Result,
)
from support import Api, free_port, wait_until

pytestmark = pytest.mark.servers

TASKS = "io.modelcontextprotocol/tasks"


class TaskHandle(Result):
    """A call's answer as a task (`resultType: "task"`)."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class TaskState(Result):
    """What `tasks/get` answers."""

    task_id: str
    status: str
    status_message: str | None = None
    result: dict[str, Any] | None = None


async def get_task(client: Client, task_id: str) -> TaskState:
    request = GetTaskRequest(params=GetTaskRequestParams(task_id=task_id))
    return await client.session.send_request(request, TaskState)


async def until_ended(client: Client, task_id: str) -> TaskState:
    for _ in range(600):
        state = await get_task(client, task_id)
        if state.status != "working":
            return state
        await asyncio.sleep(0.1)
    raise AssertionError(f"task {task_id} still working")


async def _resolve(handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
    """The SDK client's way through a task: poll it to its end on the same server."""
    for _ in range(600):
        request = GetTaskRequest(params=GetTaskRequestParams(task_id=handle.task_id))
        state = await ctx.session.send_request(request, TaskState)
        if state.status == "completed" and state.result is not None:
            return CallToolResult.model_validate(state.result)
        assert state.status == "working", state
        await asyncio.sleep(0.1)
    raise AssertionError("the task did not end")


class Tasks(ClientExtension):
    """The client side of the Tasks extension, as far as these tests need it."""

    identifier = TASKS

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=_resolve)]


def _run(base_url: str, key: str, use: Any, *, tasks: bool = True) -> Any:
    async def main() -> Any:
        headers = {"Authorization": f"Bearer {key}"}
        async with create_mcp_http_client(headers=headers) as http:
            transport = streamable_http_client(f"{base_url}/mcp", http_client=http)
            extensions = [Tasks()] if tasks else []
            async with Client(transport, cache=None, extensions=extensions) as client:
                return await use(client)

    return asyncio.run(main())


@pytest.fixture
def second_api() -> Iterator[str]:
    """Another API process on the same stack (uvicorn, as `cortex-workers api` runs it)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "config.asgi:app", "--host", "127.0.0.1"]
        + ["--port", str(port)],
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _ready(base), timeout=60, what="second api ready")
        yield base
    finally:
        proc.terminate()
        proc.wait(30)


def _ready(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_long_ask_returns_a_task_polled_to_completion_through_a_second_api(
    client: Api, api: Api, second_api: str, tenant_key: str
) -> None:
    sid = client.scripted_session({"text": "done in the end", "first_token_ms": 1500})

    async def ask(mcp: Client) -> Any:
        arguments = {"content": "go", "session_id": sid, "wait_s": 0}
        return await mcp.session.call_tool("ask", arguments, allow_claimed=True)

    handle = _run(api.base_url, tenant_key, ask)
    assert isinstance(handle, TaskHandle) and handle.status == "working", handle
    assert handle.poll_interval_ms and handle.created_at

    async def poll(mcp: Client) -> TaskState:
        return await until_ended(mcp, handle.task_id)

    state = _run(second_api, tenant_key, poll)
    assert state.status == "completed" and state.result is not None, state
    result = CallToolResult.model_validate(state.result)
    answer = dict(result.structured_content or {})
    assert not result.is_error and answer["turn_id"] == handle.task_id
    assert answer["status"] == "done" and answer["answer"] == "done in the end", answer


def test_the_sdk_client_resolves_a_task_transparently(
    client: Api, api: Api, tenant_key: str
) -> None:
    sid = client.scripted_session({"text": "patience pays", "first_token_ms": 1000})

    async def ask(mcp: Client) -> CallToolResult:
        return await mcp.call_tool("ask", {"content": "go", "session_id": sid, "wait_s": 0})

    result = _run(api.base_url, tenant_key, ask)
    assert dict(result.structured_content or {})["answer"] == "patience pays", result


def test_tasks_cancel_through_a_second_api_cancels_the_turn(
    client: Api, api: Api, second_api: str, tenant_key: str
) -> None:
    sid = client.scripted_session({"text": "never said", "first_token_ms": 30_000})

    async def ask(mcp: Client) -> Any:
        arguments = {"content": "go", "session_id": sid, "wait_s": 0}
        return await mcp.session.call_tool("ask", arguments, allow_claimed=True)

    handle = _run(api.base_url, tenant_key, ask)
    assert isinstance(handle, TaskHandle), handle

    async def cancel(mcp: Client) -> TaskState:
        request = CancelTaskRequest(params=CancelTaskRequestParams(task_id=handle.task_id))
        await mcp.session.send_request(request, EmptyResult)
        return await until_ended(mcp, handle.task_id)

    state = _run(second_api, tenant_key, cancel)
    assert state.status == "cancelled", state
    turn = client.http.get(f"/v1/turns/{handle.task_id}").json()
    assert turn["status"] == "cancelled", turn


def test_another_tenants_or_an_unknown_task_is_not_found_and_undeclared_clients_are_refused(
    client: Api, api: Api, tenant_key: str
) -> None:
    from cortex_workers.admin import create_key

    sid = client.scripted_session({"text": "mine", "first_token_ms": 1000})

    async def ask(mcp: Client) -> Any:
        arguments = {"content": "go", "session_id": sid, "wait_s": 0}
        return await mcp.session.call_tool("ask", arguments, allow_claimed=True)

    handle = _run(api.base_url, tenant_key, ask)
    assert isinstance(handle, TaskHandle), handle

    def code_of(task_id: str, key: str, *, tasks: bool = True) -> int:
        async def get(mcp: Client) -> int:
            with pytest.raises(MCPError) as info:
                await get_task(mcp, task_id)
            return info.value.error.code

        return int(_run(api.base_url, key, get, tasks=tasks))

    stranger = create_key(f"stranger-{uuid.uuid4().hex[:8]}")
    assert code_of(handle.task_id, stranger) == -32602  # another tenant's task: not found
    assert code_of("786512e2-9e0d-44bd-8f29-789f320fe840", tenant_key) == -32602
    assert code_of("not-a-task", tenant_key) == -32602
    assert code_of(handle.task_id, tenant_key, tasks=False) == -32021  # not declared


def test_an_agents_tool_answers_a_declaring_client_with_a_task(api: Api, tenant_key: str) -> None:
    async def call(mcp: Client) -> tuple[Any, TaskState]:
        # the agent sleeps 3 s: its turn cannot end within the 2 s a declaring client waits
        handle = await mcp.session.call_tool("slow_fg_agent", {"seconds": 3}, allow_claimed=True)
        assert isinstance(handle, TaskHandle), handle
        return handle, await until_ended(mcp, handle.task_id)

    handle, state = _run(api.base_url, tenant_key, call)
    assert state.status == "completed" and state.result is not None, state
    result = CallToolResult.model_validate(state.result)
    answer = dict(result.structured_content or {})
    assert not result.is_error and answer["turn_id"] == handle.task_id
    assert answer["status"] == "done" and answer["answer"] == "woke up", answer
