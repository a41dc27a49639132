"""cortex-workers as an MCP server: the official `mcp` SDK's client against our `/mcp`
(stateless streamable HTTP, the tenant's API key as the bearer token)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from support import Api

pytestmark = pytest.mark.servers


def _with_client(api: Api, key: str, use: Any) -> Any:
    async def main() -> Any:
        headers = {"Authorization": f"Bearer {key}"}
        async with create_mcp_http_client(headers=headers) as http:
            transport = streamable_http_client(f"{api.base_url}/mcp", http_client=http)
            async with Client(transport, cache=None) as client:
                return await use(client)

    return asyncio.run(main())


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result
    if result.structured_content is not None:
        return dict(result.structured_content)
    return dict(json.loads(result.content[0].text))


def test_the_sdk_client_lists_our_tools_and_ask_returns_the_answer(
    client: Api, api: Api, tenant_key: str
) -> None:
    sid = client.scripted_session({"text": "forty two"})

    async def use(mcp: Client) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
        names = [t.name for t in (await mcp.list_tools()).tools]
        answer = _data(await mcp.call_tool("ask", {"content": "the answer?", "session_id": sid}))
        listed = _data(await mcp.call_tool("list_sessions", {"limit": 5}))
        return names, answer, listed

    names, answer, listed = _with_client(api, tenant_key, use)
    assert {"ask", "list_sessions", "turn_status"} <= set(names)
    assert answer["status"] == "done" and answer["answer"] == "forty two", answer
    assert sid in [s["id"] for s in listed["sessions"]]


def test_a_call_that_takes_long_returns_the_turn_and_is_polled_to_completion(
    client: Api, api: Api, tenant_key: str
) -> None:
    sid = client.scripted_session({"text": "slow but sure", "first_token_ms": 1500})

    async def use(mcp: Client) -> tuple[dict[str, Any], dict[str, Any]]:
        started = _data(
            await mcp.call_tool("ask", {"content": "go", "session_id": sid, "wait_s": 0})
        )
        for _ in range(300):
            status = _data(await mcp.call_tool("turn_status", {"turn_id": started["turn_id"]}))
            if status["status"] == "done":
                return started, status
            await asyncio.sleep(0.2)
        raise AssertionError("the turn did not finish")

    started, status = _with_client(api, tenant_key, use)
    assert started["status"] in ("queued", "running"), started
    assert status["answer"] == "slow but sure"


def test_mcp_without_a_key_is_refused(api: Api) -> None:
    r = httpx.post(f"{api.base_url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"


def test_each_agent_card_is_a_tool_and_calling_it_runs_the_agent(
    client: Api, api: Api, tenant_key: str
) -> None:
    cards = {a["name"]: a for a in client.http.get("/v1/agents").json()["agents"]}

    async def use(mcp: Client) -> tuple[dict[str, Any], list[Any]]:
        tools = {t.name: t for t in (await mcp.list_tools()).tools}
        results = [
            await mcp.call_tool("lookup_agent", {"task": "the moon"}),  # python, on `agents`
            await mcp.call_tool("math_agent", {"task": "six times seven"}),  # llm: a sub-agent
            await mcp.call_tool("broken_agent", {"task": "anything"}),  # background, failing
            await mcp.call_tool("lookup_agent", {"topic": "no task"}),  # not the card's schema
        ]
        return tools, results

    tools, (lookup, math, broken, invalid) = _with_client(api, tenant_key, use)
    assert {f"{name}_agent" for name in cards} <= set(tools)
    assert tools["sleepy_agent"].input_schema == cards["sleepy"]["input_schema"]
    assert tools["lookup_agent"].input_schema["required"] == ["task"]
    assert "Looks a fact up at once." in (tools["lookup_agent"].description or "")

    answer = _data(lookup)
    assert answer["status"] == "done", answer
    assert json.loads(answer["answer"])["answer"] == "lookup of the moon"
    assert _data(math)["answer"] == "The product is 42, checked with the calculator."

    assert broken.is_error, broken  # the agent ran (in the foreground) and its failure shows
    failed = dict(broken.structured_content or {})
    assert failed["status"] == "failed" and "archive is unreachable" in str(failed["error"])

    assert invalid.is_error and "invalid arguments for lookup_agent" in invalid.content[0].text

    # the agent ran in a session of the caller's own, visible like any other
    session = client.http.get(f"/v1/sessions/{answer['session_id']}").json()
    assert session["agents"] == ["lookup"], session
    (task,) = client.http.get(f"/v1/sessions/{answer['session_id']}/tasks").json()
    assert task["agent"] == "lookup" and task["status"] == "completed", task
