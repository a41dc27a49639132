"""Anomaly detection and recovery policies, as the test stack configures them (tests/conftest.py:
`short_output` → retry, `latency_spike` → fallback, `cost_overrun` → rollback)."""

from __future__ import annotations

import uuid
from typing import Any

from support import Api, Fakes
from timeline_support import kinds, timeline


def _warm_up(client: Api) -> None:
    """One quick turn through the fake OpenAI first: a cold worker's first call is no
    measure of anything."""
    sid = client.create_session(model="gpt-budget-test")["id"]
    client.wait_turn(client.submit(sid, f"warm up {uuid.uuid4()}"))


def _data(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["kind"] == kind]


def test_a_short_answer_is_retried_once_then_the_turn_fails_visibly(client: Api) -> None:
    sid = client.scripted_session({"text": "  "})
    tid = client.submit(sid, "say something")
    turn = client.wait_turn(tid)
    assert turn["status"] == "failed"
    assert turn["error"]["code"] == "short_output"
    assert "retry allowance is used up" in turn["error"]["message"]
    events = timeline(client, tid)
    anomalies = _data(events, "anomaly")
    assert [(a["kind"], a["action"]) for a in anomalies] == [("short_output", "retry")] * 2
    assert [r["action"] for r in _data(events, "recovery")] == ["retry", "escalate"]
    assert [r["attempt"] for r in _data(events, "route")] == [1, 2]
    assert kinds(events)[-1] == "failure"
    assert events[-1]["data"] == turn["error"]
    # the retried attempt's answer was never stored
    assert [m["role"] for m in client.messages(sid)] == ["user"]


def test_a_slow_provider_call_falls_back_to_the_next_route(client: Api, fakes: Fakes) -> None:
    from cortex_workers.providers.latency import record_latency
    from cortex_workers.runtime import get_runtime

    _warm_up(client)
    for _ in range(10):  # the model's measured latency: fast
        record_latency(get_runtime().redis, "openai", "gpt-spike-test", 100.0)
    content = f"slow {uuid.uuid4()}"
    fakes.openai.enqueue(content, {"text": "late answer", "delay_s": 1.2})
    backup = {"text": "answered by the backup"}
    fakes.anthropic.enqueue(content, backup, backup, backup)  # a redelivery answers the same
    sid = client.create_session(model="gpt-spike-test")["id"]
    tid = client.submit(sid, content)
    turn = client.wait_turn(tid)
    assert turn["status"] == "done" and turn["answer"] == "answered by the backup"
    events = timeline(client, tid)
    (spike,) = _data(events, "anomaly")
    assert spike["kind"] == "latency_spike" and spike["action"] == "fallback"
    assert spike["latency_ms"] >= 1000 and spike["p95_ms"] == 100.0
    (fallback,) = _data(events, "recovery")
    assert fallback == {
        "action": "fallback",
        "anomaly": "latency_spike",
        "to": "anthropic:claude-spike-test",
    }
    routes = _data(events, "route")
    assert (routes[0]["provider"], routes[0]["fallback_from"]) == ("openai", None)
    assert (routes[-1]["provider"], routes[-1]["fallback_from"]) == (
        "anthropic",
        "openai:gpt-spike-test",
    )
    assert _data(events, "fallback")[-1]["from"] == "openai:gpt-spike-test"
    assert kinds(events)[-1] == "completion"


def test_a_cost_overrun_rolls_the_session_back_to_its_last_checkpoint(
    client: Api, fakes: Fakes
) -> None:
    # gpt-budget-test: $73.24 per million output tokens; 200000 of them cost far more than the
    # reserved maximum (max_tokens)
    _warm_up(client)
    first, second = f"first {uuid.uuid4()}", f"second {uuid.uuid4()}"
    fair = {"text": "a fair answer", "usage": {"input": 10, "output": 10}}
    pricey = {"text": "pricey", "usage": {"input": 10, "output": 200000}}
    fakes.openai.enqueue(first, fair, pricey)  # the fake answers by the first user message
    sid = client.create_session(model="gpt-budget-test")["id"]
    assert client.wait_turn(client.submit(sid, first))["status"] == "done"
    tid = client.submit(sid, second)
    turn = client.wait_turn(tid, statuses=("done", "failed", "cancelled", "rolled_back"))
    assert turn["status"] == "rolled_back"
    assert turn["error"]["code"] == "cost_overrun"
    events = timeline(client, tid)
    (overrun,) = _data(events, "anomaly")
    assert overrun["kind"] == "cost_overrun" and overrun["action"] == "rollback"
    assert overrun["cost_usd"] > 2 * overrun["estimate_usd"]
    assert _data(events, "recovery") == [{"action": "rollback", "anomaly": "cost_overrun"}]
    # the rolled-back turn's messages left the history; the first turn's stayed
    assert [m["content"] for m in client.messages(sid)] == [first, "a fair answer"]
