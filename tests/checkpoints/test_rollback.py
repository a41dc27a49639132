"""Rollback: later turns become `rolled_back`, their messages leave the history and the model's
context, the summary returns to its version at the checkpoint; nothing is deleted."""

from __future__ import annotations

from typing import Any

from checkpoint_support import ENDED, contents
from support import Api, wait_until


def _rollback(client: Api, sid: str, to: str | None, **kw: Any) -> Any:
    return client.http.post(f"/v1/sessions/{sid}/rollback", json={"to": to, **kw})


def _checkpoints(client: Api, sid: str) -> list[dict[str, Any]]:
    r = client.http.get(f"/v1/sessions/{sid}/checkpoints")
    assert r.status_code == 200, r.text
    return list(r.json()["checkpoints"])


def test_a_turn_after_a_rollback_no_longer_sees_the_rolled_back_messages(client: Api) -> None:
    sid = client.scripted_session()
    first = client.submit(sid, "alpha remembered")
    client.wait_turn(first)
    second = client.submit(sid, "bravo forgotten")
    client.wait_turn(second)
    assert "bravo forgotten" in contents(second)
    r = _rollback(client, sid, first)
    assert r.status_code == 200, r.text
    assert r.json()["rolled_back_turns"] == 1
    assert client.turn(second)["status"] == "rolled_back"
    again = _rollback(client, sid, first)  # idempotent
    assert again.status_code == 200 and again.json()["rolled_back_turns"] == 0
    visible = client.messages(sid)
    assert [m["content"] for m in visible] == ["alpha remembered"] * 2
    kept = client.http.get(f"/v1/sessions/{sid}/messages", params={"include_rolled_back": True})
    hidden = [m for m in kept.json()["messages"] if m["rolled_back"]]
    assert [m["content"] for m in hidden] == ["bravo forgotten"] * 2  # nothing deleted
    third = client.submit(sid, "charlie")
    assert client.wait_turn(third)["status"] == "done"
    seen = contents(third)
    assert "alpha remembered" in seen and "charlie" in seen
    assert "bravo" not in seen
    points = _checkpoints(client, sid)
    assert [p["turn_id"] for p in points] == [first, third]
    assert points[0]["parent_id"] is None and points[1]["parent_id"] == points[0]["id"]
    assert points[1]["messages_upto_seq"] > points[0]["messages_upto_seq"]


def test_a_rollback_to_the_start_empties_the_history(client: Api) -> None:
    sid = client.scripted_session()
    turns = [client.submit(sid, f"note {i}") for i in range(2)]
    for t in turns:
        client.wait_turn(t)
    r = _rollback(client, sid, None)
    assert r.status_code == 200 and r.json()["rolled_back_turns"] == 2
    assert client.messages(sid) == [] and _checkpoints(client, sid) == []
    later = client.submit(sid, "fresh start")
    client.wait_turn(later)
    assert "note" not in contents(later)


def test_the_summary_returns_to_its_version_at_the_checkpoint(client: Api) -> None:
    # The test stack keeps a window of 8 messages: six echo turns make a summary.
    sid = client.scripted_session()
    turns = [client.submit(sid, f"fact number {i}") for i in range(6)]
    for t in turns:
        client.wait_turn(t)

    def summarized() -> bool:
        steps = [s for t in turns for s in client.turn(t)["steps"]]
        return all(s["status"] == "done" for s in steps)

    wait_until(summarized, timeout=30, what="summaries folded")
    before = client.http.get(f"/v1/sessions/{sid}").json()
    assert before["summary_upto_seq"] > 0
    mark = client.submit(sid, "fact number 6")
    client.wait_turn(mark)
    later = [client.submit(sid, f"late fact {i}") for i in range(6)]
    for t in later:
        client.wait_turn(t)
    wait_until(
        lambda: "late fact" in client.http.get(f"/v1/sessions/{sid}").json()["summary"],
        timeout=30,
        what="a summary folding the later turns",
    )
    assert _rollback(client, sid, mark).status_code == 200
    after = client.http.get(f"/v1/sessions/{sid}").json()
    assert after["summary"] == before["summary"]
    assert after["summary_upto_seq"] == before["summary_upto_seq"]
    nxt = client.submit(sid, "what now")
    client.wait_turn(nxt)
    assert "late fact" not in contents(nxt)


def test_a_rollback_is_refused_while_a_turn_is_active_unless_it_interrupts(client: Api) -> None:
    sid = client.scripted_session({"text": "done"}, {"text": "slow answer", "first_token_ms": 5000})
    first = client.submit(sid, "quick")
    client.wait_turn(first)
    busy = client.submit(sid, "slow")
    r = _rollback(client, sid, first)
    assert r.status_code == 409, r.text
    assert r.json()["error"]["code"] == "session_busy"
    regen = client.http.post(f"/v1/turns/{first}/regenerate")
    assert regen.status_code == 409 and regen.json()["error"]["code"] == "session_busy"
    r = _rollback(client, sid, first, if_busy="interrupt")
    assert r.status_code == 200, r.text
    assert client.wait_turn(busy, statuses=ENDED)["status"] == "rolled_back"
    assert [m["content"] for m in client.messages(sid)] == ["quick", "done"]


def test_a_rollback_to_a_turn_that_is_not_a_checkpoint_is_refused(client: Api) -> None:
    sid = client.scripted_session({"error": {"status": 400, "message": "bad"}})
    failed = client.submit(sid, "this fails")
    assert client.wait_turn(failed)["status"] == "failed"
    r = _rollback(client, sid, failed)
    assert r.status_code == 409 and r.json()["error"]["code"] == "not_a_checkpoint"
    other = client.scripted_session()
    r = _rollback(client, other, failed)
    assert r.status_code == 404


def test_after_a_long_rollback_the_window_holds_the_messages_that_stand(client: Api) -> None:
    # The test stack keeps a window of 8 messages: the rolled-back turns' 8 messages leave a
    # gap in the seqs, and the window counts the messages that stand, not the seqs.
    sid = client.scripted_session()
    kept = [client.submit(sid, f"kept fact {i}") for i in range(3)]
    for t in kept:
        client.wait_turn(t)
    dropped = [client.submit(sid, f"dropped fact {i}") for i in range(4)]
    for t in dropped:
        client.wait_turn(t)
    assert _rollback(client, sid, kept[-1]).status_code == 200
    nxt = client.submit(sid, "what do you know")
    client.wait_turn(nxt)
    seen = contents(nxt)
    assert all(f"kept fact {i}" in seen for i in range(3)), seen
    assert "dropped" not in seen
