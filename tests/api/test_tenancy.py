"""Tenants are isolated: another tenant's ids answer 404 exactly as unknown ids do."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
from support import Api

SECRET_PROMPT = "tenant-A system prompt 7f3c"
SECRET_CONTENT = "tenant-A private question 91be"
SECRET_ANSWER = "tenant-A private answer d04a"


def _routes_with_ids(api: Api) -> list[tuple[str, str]]:
    spec = api.http.get("/openapi.json")
    assert spec.status_code == 200, spec.text
    out: list[tuple[str, str]] = []
    for path, ops in spec.json()["paths"].items():
        if "{session_id}" in path or "{turn_id}" in path:
            out.extend(
                (method.upper(), path)
                for method in ops
                if method in {"get", "post", "put", "patch", "delete"}
            )
    return out


def _call(api: Api, method: str, path: str) -> httpx.Response:
    """One request; an SSE route must answer before its first event, so read no stream."""
    body = {"content": "x"} if method == "POST" and path.endswith("/turns") else None
    with api.http.stream(method, path, json=body, timeout=15) as r:
        if r.status_code == 200 and r.headers.get("content-type", "").startswith(
            "text/event-stream"
        ):
            return r  # a live stream: the assertion on the status reports it; do not wait on it
        r.read()
        return r


def _fill(path: str, session_id: str, turn_id: str) -> str:
    return path.replace("{session_id}", session_id).replace("{turn_id}", turn_id)


def _normalized(r: httpx.Response, *ids: str) -> str:
    text = r.text
    for i in ids:
        text = text.replace(i, "<ID>")
    return text


def _not_found(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 404, f"{r.request.method} {r.request.url}: {r.status_code} {r.text}"
    body = r.json()
    assert set(body) == {"error"}, body
    assert body["error"]["code"] == "not_found", body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"], body
    assert "details" in body["error"], body
    return dict(body["error"])


def test_another_tenants_ids_answer_404_on_every_route_and_leak_nothing(
    client: Api, other_client: Api
) -> None:
    sid = client.scripted_session(
        {"text": SECRET_ANSWER}, system_prompt=SECRET_PROMPT, name="tenant-A session"
    )
    tid = client.submit(sid, SECRET_CONTENT)
    before = client.wait_turn(tid)
    assert before["status"] == "done" and before["answer"] == SECRET_ANSWER
    messages_before = client.messages(sid)

    routes = _routes_with_ids(other_client)
    walked = []
    for method, template in routes:
        theirs = _call(other_client, method, _fill(template, sid, tid))
        err = _not_found(theirs)
        # A's values B did not send appear nowhere, the one B sent only where an unknown id's would.
        sent = sid if "{session_id}" in template else tid
        for secret in {sid, tid} - {sent} | {
            SECRET_PROMPT,
            SECRET_CONTENT,
            SECRET_ANSWER,
            "tenant-A session",
        }:
            assert secret not in theirs.text, (method, template, theirs.text)
        # and the answer is the one an id that exists nowhere gets: no existence oracle
        ghost_sid, ghost_tid = str(uuid.uuid4()), str(uuid.uuid4())
        ghost = _call(other_client, method, _fill(template, ghost_sid, ghost_tid))
        _not_found(ghost)
        assert _normalized(theirs, sid, tid) == _normalized(ghost, ghost_sid, ghost_tid)
        assert set(err) == {"code", "message", "details"}
        walked.append((method, template))

    assert len(walked) >= 7, walked
    assert ("GET", "/v1/turns/{turn_id}/events") in walked
    assert ("GET", "/v1/sessions/{session_id}/events") in walked
    assert ("POST", "/v1/turns/{turn_id}/cancel") in walked
    assert ("POST", "/v1/sessions/{session_id}/turns") in walked

    # A still sees its own turn, unchanged, and B's POSTs created and cancelled nothing.
    after = client.turn(tid)
    assert after["status"] == "done"
    assert after["answer"] == before["answer"]
    assert after["finished_at"] == before["finished_at"]
    assert client.messages(sid) == messages_before
    session = client.http.get(f"/v1/sessions/{sid}").json()
    assert session["active_turn"] is None and session["queued_turns"] == 0


def test_another_tenant_cannot_cancel_a_running_turn(client: Api, other_client: Api) -> None:
    sid = client.scripted_session({"text": "slow reply here", "first_token_ms": 3000})
    tid = client.submit(sid, "take your time")
    _not_found(other_client.http.post(f"/v1/turns/{tid}/cancel"))
    _not_found(other_client.post_turn(sid, "interrupt it", if_busy="interrupt"))
    turn = client.wait_turn(tid)
    assert turn["status"] == "done", turn
    assert turn["answer"] == "slow reply here"
    assert [m["content"] for m in client.messages(sid) if m["role"] == "user"] == ["take your time"]


def test_another_tenants_idempotency_key_is_its_own(client: Api, other_client: Api) -> None:
    key = {"Idempotency-Key": f"shared-{uuid.uuid4()}"}
    sid_a = client.scripted_session({"text": "a"})
    sid_b = other_client.scripted_session({"text": "b"})
    tid_a = client.submit(sid_a, "from A", headers=key)
    r = other_client.post_turn(sid_b, "from B", headers=key)
    assert r.status_code == 202, r.text
    tid_b = r.json()["id"]
    assert tid_b != tid_a
    assert tid_a not in r.text
    assert client.wait_turn(tid_a)["answer"] == "a"
    assert other_client.wait_turn(tid_b)["answer"] == "b"


def test_openapi_id_routes_are_the_ones_the_walk_expects(client: Api) -> None:
    routes = _routes_with_ids(client)
    assert all(re.search(r"\{(session_id|turn_id)\}", p) for _, p in routes)
    assert {
        ("GET", "/v1/sessions/{session_id}"),
        ("GET", "/v1/sessions/{session_id}/messages"),
        ("POST", "/v1/sessions/{session_id}/turns"),
        ("GET", "/v1/sessions/{session_id}/events"),
        ("GET", "/v1/turns/{turn_id}"),
        ("GET", "/v1/turns/{turn_id}/events"),
        ("POST", "/v1/turns/{turn_id}/cancel"),
    } <= set(routes)
