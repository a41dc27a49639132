"""Foreground agent calls: the answer is the tool result the calling model reads, joined in
Postgres like parallel tool calls (no worker waits for the agent)."""

from __future__ import annotations

import json

from support import Api, wait_until

DONE_TEXT = "Thanks, that settles it."


def _parent(client: Api, agent: str, arguments: dict[str, object]) -> str:
    return client.scripted_session(
        {"tool_calls": [{"name": f"{agent}_agent", "arguments": arguments}]},
        {"text": DONE_TEXT},
        tools=[],
        agents=[agent],
    )


def test_an_llm_sub_agent_runs_as_a_child_turn_with_its_own_tool(client: Api) -> None:
    sid = _parent(client, "math", {"task": "what is six times seven?"})
    turn = client.wait_turn(client.submit(sid, "ask the math agent"))
    assert turn["status"] == "done"
    assert turn["answer"] == DONE_TEXT

    (task,) = client.http.get(f"/v1/sessions/{sid}/tasks").json()
    assert task["status"] == "completed"
    assert task["result"] == "The product is 42, checked with the calculator."
    child = task["child_session_id"]
    assert client.http.get(f"/v1/sessions/{child}").json()["parent_session_id"] == sid
    assert client.http.get(f"/v1/sessions/{sid}").json()["agents"] == ["math"]

    # the parent's model read the sub-agent's answer as the call's result
    tool_messages = [m for m in client.messages(sid) if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == [task["result"]]

    # the child ran its own tool in its own session, on the same pipeline
    child_messages = client.messages(child)
    assert [m["role"] for m in child_messages] == ["user", "assistant", "tool", "assistant"]
    assert child_messages[0]["content"] == "what is six times seven?"
    assert json.loads(child_messages[2]["content"]) == {"result": 42}

    events = client.turn_events(turn["id"])
    kinds = [e.event for e in events]
    assert kinds.index("agent_started") < kinds.index("agent_done") < kinds.index("done")

    # the hand-off is in the parent turn's execution timeline (docs/checkpoints.md)
    timeline = client.http.get(f"/v1/turns/{turn['id']}/timeline").json()["timeline"]
    (handoff,) = [e for e in timeline if e["kind"] == "handoff"]
    assert handoff["data"] == {
        "agent": "math",
        "kind": "llm",
        "mode": "foreground",
        "task_id": task["id"],
        "call_id": handoff["data"]["call_id"],
    }
    started = next(e for e in events if e.event == "agent_started")
    assert started.data == {
        "id": started.data["id"],
        "name": "math_agent",
        "agent": "math",
        "task_id": task["id"],
        "mode": "foreground",
    }
    result = next(e for e in events if e.event == "tool_result")
    assert result.data["content"] == task["result"]

    child_turn = client.messages(child)[0]["turn_id"]
    child_events = client.turn_events(child_turn)
    assert child_events[-1].data["status"] == "done"


def test_a_python_agent_in_the_foreground_answers_with_json(client: Api) -> None:
    sid = _parent(client, "lookup", {"task": "the boiling point of water"})
    turn = client.wait_turn(client.submit(sid, "look it up"))
    assert turn["status"] == "done"
    (task,) = client.http.get(f"/v1/sessions/{sid}/tasks").json()
    assert task["result"] == {
        "answer": "lookup of the boiling point of water",
        "task_id": task["id"],
    }
    (tool,) = [m for m in client.messages(sid) if m["role"] == "tool"]
    assert json.loads(tool["content"]) == task["result"]
    assert task["follow_up_turn_id"] is None


def test_an_async_python_agent_is_awaited_and_its_answer_stored(client: Api) -> None:
    sid = _parent(client, "async_lookup", {"task": "the speed of light"})
    turn = client.wait_turn(client.submit(sid, "look it up"))
    assert turn["status"] == "done"
    (task,) = client.http.get(f"/v1/sessions/{sid}/tasks").json()
    assert task["status"] == "completed", task["error"]
    assert task["result"] == {"answer": "async lookup of the speed of light"}
    assert task["progress"] == {"fraction": 1.0, "note": "done"}


def test_invalid_arguments_are_an_error_the_model_reads(client: Api) -> None:
    sid = _parent(client, "lookup", {"question": "no task given"})
    turn = client.wait_turn(client.submit(sid, "look it up"))
    assert turn["status"] == "done"
    (tool,) = [m for m in client.messages(sid) if m["role"] == "tool"]
    assert tool["is_error"] is True
    assert "invalid arguments for lookup_agent" in tool["content"]
    assert client.http.get(f"/v1/sessions/{sid}/tasks").json() == []


def _slow_call(client: Api) -> tuple[str, str, dict[str, object]]:
    sid = _parent(client, "slow_fg", {"seconds": 6})
    tid = client.submit(sid, "take your time")
    task = wait_until(
        lambda: next((t for t in _tasks(client, sid) if t["progress"]), None),
        timeout=30,
        what="the handler to start",
    )
    return sid, tid, dict(task)


def _tasks(client: Api, sid: str) -> list[dict[str, object]]:
    return list(client.http.get(f"/v1/sessions/{sid}/tasks").json())


def test_cancelling_a_foreground_task_is_an_error_result_the_model_reads(client: Api) -> None:
    sid, tid, task = _slow_call(client)
    r = client.http.post(f"/v1/tasks/{task['id']}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "canceled"
    turn = client.wait_turn(tid)
    assert turn["status"] == "done" and turn["answer"] == DONE_TEXT
    (tool,) = [m for m in client.messages(sid) if m["role"] == "tool"]
    assert tool["is_error"] is True and "canceled" in tool["content"]


def test_a_foreground_task_whose_turn_is_cancelled_is_cancelled_too(client: Api) -> None:
    sid, tid, task = _slow_call(client)
    assert client.http.post(f"/v1/turns/{tid}/cancel").status_code == 200
    (ended,) = wait_until(
        lambda: [t for t in _tasks(client, sid) if t["status"] == "canceled"],
        timeout=30,
        what="the reconciler to cancel the orphaned task",
    )
    assert ended["error"]["message"] == "the calling turn ended before the agent answered"
    assert ended["follow_up_turn_id"] is None
