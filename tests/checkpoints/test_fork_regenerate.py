"""Fork a session at a checkpoint, then let both diverge; regenerate a turn's answer."""

from __future__ import annotations

from checkpoint_support import ENDED, contents
from support import Api


def test_a_fork_starts_from_the_checkpoint_and_both_sessions_diverge(client: Api) -> None:
    sid = client.scripted_session(system_prompt="Be brief.")
    first = client.submit(sid, "alpha shared")
    client.wait_turn(first)
    second = client.submit(sid, "bravo original only")
    client.wait_turn(second)
    r = client.http.post(f"/v1/sessions/{sid}/fork", json={"at": first, "name": "branch"})
    assert r.status_code == 201, r.text
    fork = r.json()
    assert fork["forked_from"] == {"session_id": sid, "turn_id": first}
    assert fork["name"] == "branch" and fork["system_prompt"] == "Be brief."
    fid = fork["id"]
    assert [m["content"] for m in client.messages(fid)] == ["alpha shared"] * 2
    in_fork = client.submit(fid, "charlie fork only")
    in_origin = client.submit(sid, "delta original only")
    client.wait_turn(in_fork)
    client.wait_turn(in_origin)
    fork_seen, origin_seen = contents(in_fork), contents(in_origin)
    assert "alpha shared" in fork_seen and "alpha shared" in origin_seen
    assert "bravo" not in fork_seen and "delta" not in fork_seen
    assert "charlie" not in origin_seen and "bravo original only" in origin_seen
    assert client.http.get(f"/v1/sessions/{sid}").json()["forked_from"] is None
    points = client.http.get(f"/v1/sessions/{fid}/checkpoints").json()["checkpoints"]
    assert [p["turn_id"] for p in points] == [in_fork]
    # the fork's start is the checkpoint it was forked at: its inherited history stays
    r = client.http.post(f"/v1/sessions/{fid}/rollback", json={"to": None})
    assert r.status_code == 200 and r.json()["rolled_back_turns"] == 1
    assert [m["content"] for m in client.messages(fid)] == ["alpha shared"] * 2
    assert len(client.messages(sid)) == 6  # the original is untouched


def test_a_fork_at_a_turn_that_is_not_a_checkpoint_is_refused(client: Api) -> None:
    sid = client.scripted_session({"error": {"status": 400}})
    failed = client.submit(sid, "fails")
    client.wait_turn(failed)
    r = client.http.post(f"/v1/sessions/{sid}/fork", json={"at": failed})
    assert r.status_code == 409 and r.json()["error"]["code"] == "not_a_checkpoint"


def test_regenerate_answers_the_same_message_again_after_rolling_back(client: Api) -> None:
    sid = client.scripted_session({"text": "one"}, {"text": "first try"}, {"text": "second try"})
    first = client.submit(sid, "hello")
    client.wait_turn(first)
    second = client.submit(sid, "tell me")
    assert client.wait_turn(second)["answer"] == "first try"
    r = client.http.post(f"/v1/turns/{second}/regenerate")
    assert r.status_code == 202, r.text
    again = r.json()
    assert again["session_id"] == sid and again["seq"] == 3
    assert client.wait_turn(again["id"])["answer"] == "second try"
    assert client.turn(second)["status"] == "rolled_back"
    assert [m["content"] for m in client.messages(sid)] == ["hello", "one", "tell me", "second try"]
    assert "first try" not in contents(again["id"])
    points = client.http.get(f"/v1/sessions/{sid}/checkpoints").json()["checkpoints"]
    assert [p["turn_id"] for p in points] == [first, again["id"]]
    r = client.http.post(f"/v1/turns/{second}/regenerate")
    assert r.status_code == 409 and r.json()["error"]["code"] == "turn_rolled_back"


def test_regenerate_of_the_first_turn_rolls_back_to_the_start(client: Api) -> None:
    sid = client.scripted_session()
    first = client.submit(sid, "only question")
    client.wait_turn(first)
    r = client.http.post(f"/v1/turns/{first}/regenerate")
    assert r.status_code == 202, r.text
    assert client.wait_turn(r.json()["id"], statuses=ENDED)["status"] == "done"
    assert [m["content"] for m in client.messages(sid)] == ["only question"] * 2
