"""An open event stream checks its credential again every few seconds: once a session token
has expired, the stream ends with an `error` event (real API)."""

from __future__ import annotations

import json

import httpx
from support import Api


def test_an_open_session_stream_ends_when_its_token_expires(client: Api) -> None:
    sid = client.scripted_session({"text": "hi"})
    r = client.http.post(f"/v1/sessions/{sid}/tokens", json={"ttl_s": 2, "scope": "read"})
    assert r.status_code == 201, r.text
    token = r.json()["token"]
    events: list[tuple[str, str]] = []
    url = f"/v1/sessions/{sid}/events"
    with (
        httpx.Client(base_url=str(client.http.base_url), timeout=30) as http,
        http.stream("GET", url, params={"token": token}) as stream,
    ):
        assert stream.status_code == 200
        event = ""
        for line in stream.iter_lines():  # idle: nothing but pings until the recheck
            if line.startswith("event:"):
                event = line.partition(":")[2].strip()
            elif line.startswith("data:") and event:
                events.append((event, line.partition(":")[2].strip()))
    assert events and events[-1][0] == "error"
    assert json.loads(events[-1][1])["code"] == "credential_revoked"
