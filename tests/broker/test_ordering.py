"""One active turn per session, strictly in order; if_busy; idempotency; cancel."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from support import Api, stored_text, text_of, wait_until

pytestmark = pytest.mark.servers


def test_twenty_concurrent_posts_to_one_session_run_strictly_in_order(client: Api) -> None:
    sid = client.scripted_session()  # empty script: every turn echoes its own content
    with ThreadPoolExecutor(20) as pool:
        ids = list(pool.map(lambda i: client.submit(sid, f"message {i}"), range(20)))
    turns = [client.wait_turn(t) for t in ids]
    assert all(t["status"] == "done" for t in turns)
    by_seq = sorted(turns, key=lambda t: t["seq"])
    assert [t["seq"] for t in by_seq] == list(range(1, 21))
    for earlier, later in zip(by_seq, by_seq[1:], strict=False):
        assert earlier["finished_at"] <= later["started_at"]
    messages = client.messages(sid)
    assert len(messages) == 40
    for user, assistant in zip(messages[::2], messages[1::2], strict=True):
        assert user["role"] == "user" and assistant["role"] == "assistant"
        assert user["turn_id"] == assistant["turn_id"]
        assert assistant["content"] == user["content"]
    assert [m["turn_id"] for m in messages[::2]] == [t["id"] for t in by_seq]


def test_resubmitting_with_the_same_idempotency_key_returns_the_same_turn(client: Api) -> None:
    sid = client.scripted_session({"text": "only once"})
    headers = {"Idempotency-Key": "order-123"}
    first = client.post_turn(sid, "pay", headers=headers)
    second = client.post_turn(sid, "pay", headers=headers)
    assert first.status_code == second.status_code == 202
    assert first.json()["id"] == second.json()["id"]
    client.wait_turn(first.json()["id"])
    assert [m["role"] for m in client.messages(sid)] == ["user", "assistant"]
    other = client.post_turn(sid, "pay twice", headers=headers)
    assert other.status_code == 422
    assert other.json()["error"]["code"] == "idempotency_key_reused"


def test_reject_refuses_a_turn_while_another_is_active(client: Api) -> None:
    sid = client.scripted_session({"text": "slow", "first_token_ms": 1500})
    busy = client.submit(sid)
    r = client.post_turn(sid, "me too", if_busy="reject")
    assert r.status_code == 409
    assert r.json()["error"]["details"]["active_turn_id"] == busy
    assert client.wait_turn(busy)["status"] == "done"


def test_interrupt_cancels_the_active_turn_and_runs_the_new_one(client: Api) -> None:
    sid = client.scripted_session(
        {"text": "a very long and slow answer that will be cut", "token_ms": 200},
        {"text": "fresh answer"},
    )
    old = client.submit(sid, "first")
    wait_until(lambda: client.turn(old)["status"] == "running", what="first turn running")
    new = client.submit(sid, "second", if_busy="interrupt")
    old_events = client.turn_events(old)
    assert old_events[-1].event == "done" and old_events[-1].data["status"] == "cancelled"
    assert client.wait_turn(new)["status"] == "done"
    assert client.turn(old)["status"] == "cancelled"
    assert client.turn(new)["answer"] == "fresh answer"


def test_cancelling_a_running_turn_stops_it_at_the_next_token(client: Api) -> None:
    text = " ".join(f"w{i}" for i in range(50))
    sid = client.scripted_session({"text": text, "token_ms": 100})
    tid = client.submit(sid)
    seen = client.turn_events(tid, limit=3)
    r = client.http.post(f"/v1/turns/{tid}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    events = client.turn_events(tid, last_event_id=seen[-1].id)
    assert events[-1].event == "done" and events[-1].data["status"] == "cancelled"
    assert "message" not in [e.event for e in events]
    tokens = [e for e in seen + events if e.event == "token"]
    assert 3 <= len(tokens) < 50
    # the cut-off step's partial text is withdrawn, so streamed text equals stored text
    restart = [e for e in events if e.event == "step_restart"]
    assert restart and restart[-1].data["step"] == 1
    assert text_of(seen + events) == ""
    # the model step noticed and released its step; nothing was stored for it
    turn = client.wait_turn(tid)
    assert turn["status"] == "cancelled"
    assert wait_until(
        lambda: all(s["status"] == "cancelled" for s in client.turn(tid)["steps"]),
        what="step cancelled",
    )
    assert stored_text(client.messages(sid), tid) == ""


def test_cancelling_a_queued_turn_lets_the_next_one_run(client: Api) -> None:
    sid = client.scripted_session({"text": "first", "first_token_ms": 800}, {"text": "third"})
    first = client.submit(sid, "1")
    second = client.submit(sid, "2")
    third = client.submit(sid, "3")
    r = client.http.post(f"/v1/turns/{second}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    assert client.turn_events(second)[-1].data["status"] == "cancelled"
    assert client.wait_turn(first)["status"] == "done"
    assert client.wait_turn(third)["status"] == "done"
    assert [m["content"] for m in client.messages(sid) if m["role"] == "user"] == ["1", "3"]
    assert text_of(client.turn_events(third)) == "third"
