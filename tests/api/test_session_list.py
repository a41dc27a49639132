"""`GET /v1/sessions`: the tenant's own sessions, newest first, paged by `before`, each with its
last activity."""

from __future__ import annotations

from datetime import datetime

from support import Api


def test_sessions_are_listed_newest_first_in_pages_and_per_tenant(
    client: Api, other_client: Api
) -> None:
    made = [client.create_session(name=f"s{i}")["id"] for i in range(3)]
    theirs = other_client.create_session(name="theirs")["id"]
    first = client.http.get("/v1/sessions", params={"limit": 2}).json()
    assert [s["id"] for s in first["sessions"]] == made[::-1][:2]
    assert first["next_before"] == made[1]
    rest = client.http.get("/v1/sessions", params={"limit": 2, "before": made[1]}).json()
    assert [s["id"] for s in rest["sessions"]] == [made[0]] and rest["next_before"] is None
    assert [s["name"] for s in rest["sessions"]] == ["s0"]
    listed = other_client.http.get("/v1/sessions").json()["sessions"]
    assert [s["id"] for s in listed] == [theirs]
    assert client.http.get("/v1/sessions", params={"limit": 0}).status_code == 422


def test_each_session_says_when_its_newest_turn_was_active_else_when_it_was_made(
    client: Api,
) -> None:
    talked = client.scripted_session({"text": "hi"}, {"text": "again"}, name="talked")
    quiet = client.create_session(name="quiet")
    client.wait_turn(client.submit(talked, "one"))
    last = client.wait_turn(client.submit(talked, "two"))
    assert last["status"] == "done"

    listed = {s["id"]: s for s in client.http.get("/v1/sessions").json()["sessions"]}
    for shown in (listed[talked], client.http.get(f"/v1/sessions/{talked}").json()):
        assert _at(shown["last_activity_at"]) == _at(last["finished_at"])
        assert _at(shown["last_activity_at"]) > _at(shown["created_at"])
    for shown in (listed[quiet["id"]], client.http.get(f"/v1/sessions/{quiet['id']}").json()):
        assert shown["last_activity_at"] == shown["created_at"]
    assert quiet["last_activity_at"] == quiet["created_at"]  # as created
    # the listing stays ordered by creation: the quiet session is the newer one
    assert list(listed)[:2] == [quiet["id"], talked]


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value)
