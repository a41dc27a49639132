"""An agent runs only when its session offers it, and a sub-agent's child session keeps the
parent's mode, route and end user (real workers)."""

from __future__ import annotations

from support import Api

DONE_TEXT = "Done."


def test_an_agent_the_session_does_not_offer_is_never_started(client: Api) -> None:
    sid = client.scripted_session(
        {"tool_calls": [{"name": "lookup_agent", "arguments": {"task": "who?"}}]},
        {"text": DONE_TEXT},
        tools=[],
        agents=["math"],
    )
    turn = client.wait_turn(client.submit(sid, "ask the lookup agent anyway"))
    assert turn["status"] == "done"
    (result,) = [m for m in client.messages(sid) if m["role"] == "tool"]
    assert "forbidden" in result["content"] and "lookup" in result["content"]
    assert client.http.get(f"/v1/sessions/{sid}/tasks").json() == []


def test_a_session_without_agents_starts_none(client: Api) -> None:
    sid = client.scripted_session(
        {"tool_calls": [{"name": "math_agent", "arguments": {"task": "6*7"}}]},
        {"text": DONE_TEXT},
        tools=[],
    )
    assert client.wait_turn(client.submit(sid, "try the math agent"))["status"] == "done"
    assert client.http.get(f"/v1/sessions/{sid}/tasks").json() == []


def test_a_sub_agent_s_child_session_keeps_the_parent_s_mode_route_and_user(
    client: Api,
) -> None:
    sid = client.scripted_session(
        {"tool_calls": [{"name": "math_agent", "arguments": {"task": "6*7"}}]},
        {"text": DONE_TEXT},
        tools=[],
        agents=["math"],
        user="end-user-7",
        mode="frugal",
    )
    assert client.wait_turn(client.submit(sid, "ask the math agent"))["status"] == "done"
    (task,) = client.http.get(f"/v1/sessions/{sid}/tasks").json()
    child = client.http.get(f"/v1/sessions/{task['child_session_id']}").json()
    assert child["user"] == "end-user-7" and child["mode"] == "frugal"
