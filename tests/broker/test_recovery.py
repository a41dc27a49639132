"""Crashes cost latency, not turns: a SIGKILLed worker's step is recovered by the reconciler."""

from __future__ import annotations

from collections import Counter

import pytest
from support import Api, Workers, stored_text, text_of, wait_until

pytestmark = pytest.mark.servers


def test_killing_the_llm_worker_mid_step_still_completes_the_turn_exactly_once(
    client: Api, workers: Workers
) -> None:
    text = " ".join(f"t{i}" for i in range(30))
    sid = client.scripted_session(
        {"text": "Calling.", "tool_calls": [{"name": "current_time", "arguments": {}}]},
        {"text": text, "token_ms": 100},
    )
    tid = client.submit(sid)
    # wait until the second model step is streaming, then kill its worker
    seen = wait_until(
        lambda: [
            e
            for e in client.turn_events(tid, limit=8)
            if e.event == "token" and e.data["step"] == 3
        ][:1],
        timeout=30,
        what="second model step streaming",
    )
    assert seen
    workers.kill("llm")
    workers.start("llm")
    turn = client.wait_turn(tid, timeout=90)
    assert turn["status"] == "done"
    assert turn["answer"] == text
    model_steps = [s for s in turn["steps"] if s["kind"] == "model"]
    assert model_steps[-1]["attempt"] >= 2
    messages = client.messages(sid)
    per_step = Counter((m["turn_id"], m["role"]) for m in messages)
    assert per_step[(tid, "assistant")] == 2  # one per model step, no duplicates
    events = client.turn_events(tid)
    assert any(e.event == "step_restart" for e in events)
    assert text_of(events) == stored_text(messages, tid)
    assert [e.event for e in events].count("done") == 1
