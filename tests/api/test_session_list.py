"""`GET /v1/sessions`: the tenant's own sessions, newest first, paged by `before`."""

from __future__ import annotations

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
