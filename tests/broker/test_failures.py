"""Failures are visible and bounded: depth cap, tool errors, retryable and final provider errors."""

from __future__ import annotations

import pytest
from support import Api, stored_text, text_of

pytestmark = pytest.mark.servers

CALC = {"name": "calculate", "arguments": {"expression": "1+1"}}


def test_the_depth_cap_ends_the_turn_with_a_visible_message(client: Api) -> None:
    # The test stack caps turns at 4 model steps; this script would call tools forever.
    sid = client.scripted_session(
        *[{"text": f"step {i}.", "tool_calls": [CALC]} for i in range(10)]
    )
    tid = client.submit(sid)
    events = client.turn_events(tid)
    turn = client.wait_turn(tid)
    assert turn["status"] == "failed"
    assert turn["error"]["code"] == "depth_exceeded"
    assert [e.event for e in events][-2:] == ["error", "done"]
    assert events[-1].data["status"] == "failed"
    model_steps = [s for s in turn["steps"] if s["kind"] == "model"]
    assert len(model_steps) == 5  # four model calls, then the notice
    assert "limit of 4 model steps" in turn["answer"]
    assert "limit of 4 model steps" in text_of(events)
    assert text_of(events) == stored_text(client.messages(sid), tid)


def test_an_invalid_tool_call_becomes_an_error_result_the_model_reads(client: Api) -> None:
    sid = client.scripted_session(
        {"tool_calls": [{"name": "calculate", "arguments": {"expr": "1+1"}}]},
        {"tool_calls": [{"name": "calculate", "arguments": {"expression": "1/0"}}]},
        {"text": "Sorry, I could not compute that."},
    )
    tid = client.submit(sid)
    events = client.turn_events(tid)
    results = [e.data for e in events if e.event == "tool_result"]
    assert [r["is_error"] for r in results] == [True, True]
    assert results[0]["content"].startswith("validation: ")
    assert "expression" in results[0]["content"] and results[0]["severity"] == "warning"
    assert results[1]["content"] == "invalid: division by zero"
    turn = client.wait_turn(tid)
    assert turn["status"] == "done"
    assert turn["answer"] == "Sorry, I could not compute that."
    tool_messages = [m for m in client.messages(sid) if m["role"] == "tool"]
    assert [m["is_error"] for m in tool_messages] == [True, True]
    # The model's context for each later step contained the error results.
    from cortex_workers.runtime import get_runtime
    from cortex_workers.store.models import Step
    from cortex_workers.store.steps import Claim
    from cortex_workers.turns.context import load_model_context

    rt = get_runtime()
    with rt.db() as db:
        last = (
            db.query(Step)
            .filter(Step.turn_id == tid, Step.kind == "model")
            .order_by(Step.step_no.desc())
            .first()
        )
        assert last is not None
        claim = Claim(
            last.id,
            last.turn_id,
            last.step_no,
            "model",
            1,
            last.parent_step_id,
            last.call_index,
            None,
        )
        ctx = load_model_context(rt, db, claim)
    seen = [m for m in ctx.messages if m.role == "tool"]
    assert [m.is_error for m in seen] == [True, True]
    assert "division by zero" in seen[1].content


def test_a_retryable_provider_error_is_retried_and_the_turn_completes(client: Api) -> None:
    sid = client.scripted_session(
        {"text": "made it", "error": {"status": 503, "message": "overloaded", "times": 2}}
    )
    tid = client.submit(sid)
    events = client.turn_events(tid)
    turn = client.wait_turn(tid)
    assert turn["status"] == "done" and turn["answer"] == "made it"
    assert turn["steps"][0]["attempt"] == 3
    assert turn["steps"][0]["status"] == "done" and turn["steps"][0]["error"] is None
    restarts = [e.data for e in events if e.event == "step_restart"]
    assert [r["attempt"] for r in restarts] == [2, 3]
    assert text_of(events) == "made it"


def test_a_final_provider_error_fails_the_turn_visibly(client: Api) -> None:
    sid = client.scripted_session(
        {"text": "never", "error": {"status": 400, "message": "bad request: no such model"}},
        {"text": "next turn works"},
    )
    tid = client.submit(sid)
    events = client.turn_events(tid)
    error = next(e.data for e in events if e.event == "error")
    assert "400" in error["message"] and "no such model" in error["message"]
    assert events[-1].event == "done" and events[-1].data["status"] == "failed"
    turn = client.wait_turn(tid)
    assert turn["status"] == "failed" and turn["error"]["message"] == error["message"]
    step = turn["steps"][0]
    assert step["attempt"] == 1 and step["status"] == "failed"
    assert step["error"]["message"] == error["message"]
    # the session is not stuck: the next turn runs
    nxt = client.submit(sid, "again")
    assert client.wait_turn(nxt)["answer"] == "next turn works"


def test_retries_stop_at_the_attempt_cap_and_fail_the_turn(client: Api) -> None:
    sid = client.scripted_session(
        {"text": "never", "error": {"status": 429, "message": "slow down", "times": 50}}
    )
    tid = client.submit(sid)
    turn = client.wait_turn(tid)
    assert turn["status"] == "failed"
    assert "gave up after 5 attempts" in turn["error"]["message"]
    assert turn["steps"][0]["attempt"] == 5 and turn["steps"][0]["status"] == "failed"
