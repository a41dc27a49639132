"""A whole turn through the real pipeline: API → llm → tools (parallel) → llm → done."""

from __future__ import annotations

import pytest
from support import Api, stored_text, text_of

pytestmark = pytest.mark.servers

TWO_TOOLS = [
    {
        "text": "Let me look that up.",
        "tool_calls": [
            {"name": "calculate", "arguments": {"expression": "6*7"}},
            {"name": "current_time", "arguments": {}},
        ],
    },
    {"text": "Six times seven is 42.", "token_ms": 5},
]


def test_a_turn_with_two_parallel_tool_calls_streams_and_is_stored(client: Api) -> None:
    sid = client.scripted_session(*TWO_TOOLS)
    r = client.post_turn(sid, "what is 6*7, and what time is it?")
    assert r.status_code == 202
    accepted = r.json()
    assert accepted["events_url"] == f"/v1/turns/{accepted['id']}/events"

    events = client.turn_events(accepted["id"])
    kinds = [e.event for e in events]
    assert kinds[-1] == "done" and events[-1].data["status"] == "done"
    calls = [e.data for e in events if e.event == "tool_call"]
    results = {e.data["id"]: e.data for e in events if e.event == "tool_result"}
    assert [c["name"] for c in calls] == ["calculate", "current_time"]
    assert set(results) == {c["id"] for c in calls}
    assert results[calls[0]["id"]]["content"] == '{"result": 42}'
    assert all(r["is_error"] is False and r["truncated"] is False for r in results.values())
    # tool results come after the calls and before the next model step's tokens
    assert max(kinds.index("tool_call"), 0) < kinds.index("tool_result")
    last_result = max(i for i, k in enumerate(kinds) if k == "tool_result")
    assert any(k == "token" for k in kinds[last_result:])

    turn = client.turn(accepted["id"])
    assert turn["status"] == "done"
    assert turn["answer"] == "Six times seven is 42."
    assert [s["kind"] for s in turn["steps"]] == ["model", "tool", "tool", "model"]
    assert all(s["status"] == "done" and s["attempt"] == 1 for s in turn["steps"])
    assert turn["usage"]["output_tokens"] > 0
    assert events[-1].data["usage"] == {
        k: turn["usage"][k] for k in ("input_tokens", "output_tokens")
    }

    messages = client.messages(sid)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert text_of(events) == stored_text(messages, accepted["id"])
    assert text_of(events) == "Let me look that up." + "Six times seven is 42."


def test_every_tool_call_and_model_call_is_audited_once(client: Api) -> None:
    from sqlalchemy import func, select

    from cortex_workers.runtime import get_runtime
    from cortex_workers.store.models import Decision

    sid = client.scripted_session(*TWO_TOOLS)
    tid = client.submit(sid, "go")
    client.wait_turn(tid)
    with get_runtime().db() as db:
        rows = db.execute(
            select(Decision.kind, func.count())
            .where(Decision.turn_id == tid)
            .group_by(Decision.kind)
        ).all()
    assert dict(rows) == {"model": 2, "tool": 2}


def test_an_exhausted_script_echoes_the_last_user_message(client: Api) -> None:
    sid = client.scripted_session({"text": "first"})
    first = client.submit(sid, "one")
    assert client.wait_turn(first)["answer"] == "first"
    second = client.submit(sid, "say this back")
    assert client.wait_turn(second)["answer"] == "say this back"


def test_a_session_restricted_to_one_tool_refuses_the_others(client: Api) -> None:
    sid = client.scripted_session(
        {"tool_calls": [{"name": "current_time", "arguments": {}}]},
        {"text": "ok"},
        tools=["calculate"],
    )
    tid = client.submit(sid)
    events = client.turn_events(tid)
    result = next(e.data for e in events if e.event == "tool_result")
    assert result["is_error"] is True
    assert "unknown tool 'current_time'" in result["content"]
    assert client.wait_turn(tid)["status"] == "done"
