"""MCP servers as tool sources (docs/mcp.md), with real servers built with the official `mcp`
SDK on loopback: one over streamable HTTP, one over stdio (tests/mcp/mcp_server.py)."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from mcp_support import CHART_PNG, McpHttpServer, call_once, calls, grow, tool_result
from support import Api, wait_until

pytestmark = pytest.mark.servers


def test_get_tools_lists_both_servers_tools_with_their_source_and_schema(
    client: Api, served: McpHttpServer
) -> None:
    body = client.http.get("/v1/tools").json()
    tools = {t["name"]: t for t in body["tools"]}
    assert tools["weather_forecast"]["source"] == "mcp:weather"
    assert tools["local_forecast"]["source"] == "mcp:local"
    assert tools["weather_forecast"]["parameters"]["properties"]["city"]["type"] == "string"
    assert "weather_secret" not in tools  # hidden by allowed_tools
    assert "local_add" not in tools
    (guarded,) = [r for r in body["rejected"] if r["source"] == "mcp guarded"]
    assert "allow_private" in guarded["reason"]


def test_a_turn_calls_both_servers_in_parallel_and_gets_both_results(
    client: Api, served: McpHttpServer
) -> None:
    sid = client.scripted_session(
        {
            "tool_calls": [
                {"name": "weather_forecast", "arguments": {"city": "Oslo"}},
                {"name": "local_forecast", "arguments": {"city": "Rome"}},
            ]
        },
        {"text": "both answered"},
        tools=["weather.*", "local.*"],
    )
    tid = client.submit(sid, "weather?")
    assert client.wait_turn(tid, timeout=60)["status"] == "done"
    results = {r["name"]: r for r in tool_result(client, tid)}
    assert not results["weather_forecast"]["is_error"], results
    assert not results["local_forecast"]["is_error"], results
    assert "sunny in Oslo (http)" in str(results["weather_forecast"]["content"])
    assert "sunny in Rome (stdio)" in str(results["local_forecast"]["content"])
    oslo = [c for c in calls("forecast") if c["city"] == "Oslo"]
    assert oslo and str(oslo[-1]["meta"]["io.cortex-workers/idempotency-key"]).startswith("cw-")


def test_a_tool_that_raises_gives_an_is_error_result(client: Api, served: McpHttpServer) -> None:
    result = call_once(client, "weather_explode", {})
    assert result["is_error"] and result["error"] == "tool", result
    assert str(result["content"]).startswith("error:")


def test_a_hidden_tool_cannot_be_called(client: Api, served: McpHttpServer) -> None:
    result = call_once(client, "weather_secret", {})
    assert result["is_error"] and result["error"] == "validation", result


def test_require_confirmation_makes_a_proposal_executed_once_after_the_confirm(
    client: Api, served: McpHttpServer
) -> None:
    before = len(calls("add"))
    result = call_once(client, "weather_add", {"a": 20, "b": 22})
    assert not result["is_error"], result
    pid = json.loads(str(result["content"]))["proposal_id"]
    assert len(calls("add")) == before  # nothing runs before the confirm
    assert client.http.post(f"/v1/proposals/{pid}/confirm").status_code == 200
    done = wait_until(
        lambda: (p := client.http.get(f"/v1/proposals/{pid}").json())["status"] == "executed" and p,
        timeout=60,
        what="the confirmed MCP call",
    )
    assert done["outcome"]["result"]["structured"] == {"sum": 42}
    assert client.http.post(f"/v1/proposals/{pid}/confirm").status_code == 200
    added = calls("add")[before:]
    assert len(added) == 1 and added[0]["meta"]["io.cortex-workers/idempotency-key"]


def test_a_stopped_server_gives_an_is_error_result_and_the_turn_ends_done(
    client: Api, served: McpHttpServer
) -> None:
    served.stop()
    result = call_once(client, "weather_forecast", {"city": "Bergen"})
    assert result["is_error"], result
    wait_until(
        lambda: any(
            r["source"] == "mcp weather" for r in client.http.get("/v1/tools").json()["rejected"]
        ),
        timeout=30,
        what="the stopped server reported unavailable",
    )
    # a session naming one of its tools goes on without it while the server is down
    sid = client.scripted_session({"text": "fine without it"}, tools=["weather_forecast"])
    turn = client.wait_turn(client.submit(sid, "forecast?"), timeout=60)
    assert turn["status"] == "done" and turn["answer"] == "fine without it", turn


def test_an_image_of_a_tool_result_is_passed_on_to_the_model(
    client: Api, served: McpHttpServer
) -> None:
    sid = client.scripted_session(
        {"tool_calls": [{"name": "weather_chart", "arguments": {"city": "Oslo"}}]},
        {"echo_request": True},  # the answer: what the model was sent
        tools=["weather.*"],
    )
    tid = client.submit(sid, "a chart?")
    turn = client.wait_turn(tid, timeout=60)
    assert turn["status"] == "done", turn
    (result,) = tool_result(client, tid)
    content = json.loads(str(result["content"]))  # what the model reads as the result
    assert content == {
        "text": "the week in Oslo",
        "media": [{"type": "image", "mime_type": "image/png"}],
    }
    url = "data:image/png;base64," + base64.b64encode(CHART_PNG).decode()
    sent = json.loads(turn["answer"])
    assert sent["roles"][-1] == "tool" and sent["images"] == [url[:64]], sent
    # stored with the result's `tool` message, so a later step of the session sends it too
    history = client.http.get(f"/v1/sessions/{sid}/messages").json()
    (tool,) = [m for m in history["messages"] if m["role"] == "tool"]
    assert tool["images"] == [url], tool


def test_a_tool_list_change_over_http_is_seen_without_waiting_for_the_schedule(
    client: Api, served: McpHttpServer
) -> None:
    """`notify` is read on a schedule of an hour: its new tools show in time only because the
    server's `notifications/tools/list_changed` reaches every process (on its listen stream)."""
    grown: list[str] = []

    def listed() -> list[str]:
        # a change sent before a process's stream is open is not replayed: grow again
        grown.append(f"t{uuid.uuid4().hex[:8]}")
        grow(grown[-1])
        tools = {t["name"]: t for t in client.http.get("/v1/tools").json()["tools"]}
        seen = [n for n in grown if f"notify_grown_{n}" in tools]
        assert all(tools[f"notify_grown_{n}"]["source"] == "mcp:notify" for n in seen)
        return seen

    seen = wait_until(listed, timeout=60, interval=1, what="the API reading the changed list")
    newest = f"notify_grown_{seen[-1]}"

    def called() -> bool:  # the tools worker's registry too
        sid = client.scripted_session(
            {"tool_calls": [{"name": newest, "arguments": {}}]}, {"text": "ok"}, tools=[newest]
        )
        tid = client.submit(sid, "grown?")
        assert client.wait_turn(tid, timeout=60)["status"] == "done"
        (result,) = tool_result(client, tid)
        return not result["is_error"] and f"grown {seen[-1]}" in str(result["content"])

    wait_until(called, timeout=60, interval=1, what="the tools worker calling the new tool")
