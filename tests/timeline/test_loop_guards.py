"""Guarding the tool loop: repetition, a tool's limit per turn, calls run at once."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from support import Api
from timeline_support import kinds, timeline


def calc(expression: str) -> dict[str, Any]:
    return {"name": "calculate", "arguments": {"expression": expression}}


def tool_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["kind"] == "tool"]


def test_a_call_repeated_a_third_time_is_not_run_and_the_model_is_told(client: Api) -> None:
    # the same arguments, one written 0.0: canonically (as JSON values) the same call
    same = [
        {"name": "slow_tool", "arguments": {"seconds": 0}},
        {"name": "slow_tool", "arguments": {"seconds": 0.0}},
    ]
    sid = client.scripted_session(
        {"text": "one", "tool_calls": [same[0], same[1]]},
        {"text": "two", "tool_calls": [same[0], calc("1+1")]},
        {"text": "three", "tool_calls": [same[0]]},
        {"text": "I will stop."},
    )
    tid = client.submit(sid, "go")
    turn = client.wait_turn(tid)
    assert turn["status"] == "done", turn
    events = timeline(client, tid)
    calls = [c for c in tool_events(events) if c["name"] == "slow_tool"]
    assert [c["is_error"] for c in calls] == [False, False, False, True]
    assert "repeating yourself" in next(
        m["content"] for m in client.messages(sid) if m["role"] == "tool" and m["is_error"]
    )
    anomalies = [e for e in events if e["kind"] == "anomaly"]
    assert len(anomalies) == 1
    assert anomalies[0]["data"]["kind"] == "repeated_tool_call"
    assert anomalies[0]["data"]["calls"] == 4 and anomalies[0]["data"]["action"] == "continue"
    assert kinds(events).index("anomaly") < len(events) - 1


def test_a_tool_past_its_limit_is_refused_then_no_longer_offered(client: Api) -> None:
    sid = client.scripted_session(
        {"text": "a", "tool_calls": [calc("1+1"), calc("2+2"), calc("3+3")]},
        {"text": "b", "tool_calls": [{"name": "current_time", "arguments": {}}]},
        {"text": "done"},
        metadata={"tool_call_limits": {"calculate": 2}},
    )
    tid = client.submit(sid, "go")
    assert client.wait_turn(tid)["status"] == "done"
    results = tool_events(timeline(client, tid))
    # results are recorded as they finish: the refused call may end before the others
    refused = {r["arguments"]["expression"] for r in results if r["is_error"]}
    assert refused == {"3+3"}  # the third call, in the order the model asked
    assert sorted((r["name"], r["is_error"]) for r in results) == [
        ("calculate", False),
        ("calculate", False),
        ("calculate", True),
        ("current_time", False),
    ]  # fmt: skip
    told = [m for m in client.messages(sid) if m["role"] == "tool" and m["is_error"]]
    assert "at most 2 times" in told[0]["content"]
    offered = _offered_tools(tid)
    assert "calculate" in offered[0] and "calculate" not in offered[1]
    assert "current_time" in offered[1]


def _offered_tools(turn_id: str) -> list[list[str]]:
    """The tools each model call of the turn offered, from its audit row."""
    from sqlalchemy import select

    from cortex_workers.runtime import get_runtime
    from cortex_workers.store.models import Decision

    with get_runtime().db() as db:
        rows = db.execute(
            select(Decision.input)
            .where(Decision.turn_id == turn_id, Decision.kind == "model")
            .order_by(Decision.created_at)
        ).all()
    return [list(r.input["tools"]) for r in rows]


def test_calls_past_max_parallel_tools_wait_and_none_is_dropped(client: Api) -> None:
    slow = [{"name": "slow_tool", "arguments": {"seconds": 0.3 + i / 100}} for i in range(5)]
    sid = client.scripted_session({"text": "five at once", "tool_calls": slow}, {"text": "ok"})
    tid = client.submit(sid, "go")
    assert client.wait_turn(tid)["status"] == "done"
    events = timeline(client, tid)
    runs = [e for e in events if e["kind"] == "tool"]
    assert len(runs) == 5 and not any(e["data"]["is_error"] for e in runs)
    # each run's interval: it ended before its event was written, and lasted latency_ms
    spans = []
    for e in runs:
        end = datetime.fromisoformat(e["at"]).timestamp()
        spans.append((end - e["data"]["latency_ms"] / 1000, end))
    most = max(sum(1 for s, t in spans if s <= start < t) for start, _ in spans)
    assert most <= 2
