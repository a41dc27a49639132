"""Tools that answer with a task (docs/mcp.md): a real MCP server built with the official
`mcp` SDK (tests/mcp/mcp_task_server.py) answers a tool step's call with a task handle; the
step is parked, no worker waits, polls send `tasks/get`, and the task's result becomes the
call's result."""

from __future__ import annotations

import json
import uuid

import pytest
from mcp_support import McpHttpServer, call_once, release, task_requests, tool_result
from support import Api, Workers, wait_until

pytestmark = pytest.mark.servers


def _report_turn(client: Api, label: str) -> str:
    sid = client.scripted_session(
        {"tool_calls": [{"name": "tasks_report", "arguments": {"label": label}}]},
        {"text": "the report is in"},
        tools=["tasks.*"],
    )
    return client.submit(sid, "write the report")


def test_a_task_waits_without_holding_a_worker_then_its_result_is_the_calls_result(
    client: Api, one_tools_thread: Workers, tasks_served: McpHttpServer
) -> None:
    label = f"r{uuid.uuid4().hex[:8]}"
    tid = _report_turn(client, label)
    wait_until(
        lambda: len(task_requests("get", label)) >= 2,
        timeout=90,
        what="polls of the report's task",
    )
    # the only tools thread is free: another turn's call runs while the task is working
    quick = call_once(client, "tasks_quick", {"word": "meanwhile"}, tools=["tasks.*"])
    assert not quick["is_error"] and "quick meanwhile" in str(quick["content"]), quick
    assert client.turn(tid)["status"] == "running"  # its task is not released yet
    release(label)
    turn = client.wait_turn(tid, timeout=90)
    assert turn["status"] == "done" and turn["answer"] == "the report is in", turn
    (result,) = tool_result(client, tid)
    assert not result["is_error"], result
    assert json.loads(str(result["content"])) == {
        "text": f"the report {label} is ready",
        "structured": {"label": label, "pages": 3},
    }
    (call,) = task_requests("call", label)  # called once, answered with a task
    assert call["declared"] is True
    assert task_requests("cancel", label) == []
    progress = [e.data for e in client.turn_events(tid) if e.event == "tool_progress"]
    assert any("task" in str(p["message"]) for p in progress), progress


def test_a_task_that_fails_gives_an_is_error_result_and_the_turn_ends_done(
    client: Api, tasks_served: McpHttpServer
) -> None:
    label = f"b{uuid.uuid4().hex[:8]}"
    result = call_once(client, "tasks_broken_report", {"label": label}, tools=["tasks.*"])
    assert result["is_error"] and result["error"] == "tool", result
    assert "the task failed: the printer caught fire" in str(result["content"]), result
    assert len(task_requests("call", label)) == 1


def test_a_task_past_its_time_to_live_gives_an_is_error_result_and_is_cancelled(
    client: Api, tasks_served: McpHttpServer
) -> None:
    label = f"s{uuid.uuid4().hex[:8]}"
    result = call_once(client, "tasks_stuck_report", {"label": label}, tools=["tasks.*"])
    assert result["is_error"] and result["error"] == "tool", result
    assert "the task did not end within 2 s" in str(result["content"]), result
    assert task_requests("get", label)  # looked at while it lived
    assert len(task_requests("cancel", label)) == 1


def test_cancelling_the_turn_cancels_its_task(client: Api, tasks_served: McpHttpServer) -> None:
    label = f"c{uuid.uuid4().hex[:8]}"
    tid = _report_turn(client, label)
    wait_until(lambda: task_requests("get", label), timeout=90, what="a poll of the task")
    assert client.http.post(f"/v1/turns/{tid}/cancel").status_code in (200, 202)
    assert client.wait_turn(tid, timeout=60)["status"] == "cancelled"
    wait_until(lambda: task_requests("cancel", label), timeout=60, what="tasks/cancel")
    release(label)  # a poll that came late finds nothing to wait for
    assert len(task_requests("cancel", label)) == 1


def test_a_task_handle_with_an_oversized_id_is_an_error_result_not_a_parked_call(
    client: Api, tasks_served: McpHttpServer
) -> None:
    label = f"o{uuid.uuid4().hex[:8]}"
    result = call_once(client, "tasks_oversized_report", {"label": label}, tools=["tasks.*"])
    assert result["is_error"] and result["error"] == "tool", result
    assert "the MCP server answered with an invalid result (" in str(result["content"])
    assert "at most 500 characters" in str(result["content"])
    assert len(task_requests("call", label)) == 1
    assert task_requests("get", label) == []  # never parked, never polled
