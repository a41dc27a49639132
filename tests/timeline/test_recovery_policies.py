"""Anomaly detection and recovery policies, as the test stack configures them (tests/conftest.py:
`short_output` → retry, `latency_spike` → fallback, `cost_overrun` → rollback)."""

from __future__ import annotations

from typing import Any

from support import Api
from timeline_support import kinds, timeline


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
