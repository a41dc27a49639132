"""A step keeps its lease for as long as it runs (the lease is 3 s in the suite), and a lease
the keeper could not renew is noticed by the step that lost it."""

from __future__ import annotations

import pytest
from support import Api, text_of

pytestmark = pytest.mark.servers


def test_a_model_slower_to_first_token_than_the_lease_is_not_run_twice(client: Api) -> None:
    sid = client.scripted_session({"text": "late but once", "first_token_ms": 7000})
    tid = client.submit(sid)
    turn = client.wait_turn(tid, timeout=60)
    assert turn["status"] == "done" and turn["answer"] == "late but once"
    assert [s["attempt"] for s in turn["steps"]] == [1]
    events = client.turn_events(tid)
    assert "step_restart" not in [e.event for e in events]
    assert text_of(events) == "late but once"


def test_a_tool_running_longer_than_the_lease_is_not_run_twice(client: Api) -> None:
    sid = client.scripted_session(
        {"text": "", "tool_calls": [{"name": "long_tool", "arguments": {"seconds": 7}}]},
        {"text": "slept"},
        tools=["long_tool"],
    )
    tid = client.submit(sid)
    turn = client.wait_turn(tid, timeout=60)
    assert turn["status"] == "done"
    tool_steps = [s for s in turn["steps"] if s["kind"] == "tool"]
    assert [s["attempt"] for s in tool_steps] == [1]
    assert [c["status"] for c in turn["tool_calls"]] == ["done"]
