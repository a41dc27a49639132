"""Session tokens: a signed grant to one session; any other session's ids answer 404, routes
a token may not use answer 401, a `read` token cannot act (403), and `?token=` works on the two
event streams only and never reaches the access log."""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from api.test_tenancy import PATH_PARAM, _bodies, _call, _fill, _routes_with_ids
from support import Api, parse_sse

import cortex_workers.api
from cortex_workers.api.session_tokens import SessionGrant, sign
from cortex_workers.vocabulary import TokenScope

PROPOSE = {
    "name": "propose_action",
    "arguments": {"action": "restart", "product": "x", "rationale": "y"},
}
SECRET = b"test-session-token-secret"  # CORTEX_TOKEN_SECRET of the test stack
TOKEN_ROUTES = {
    ("GET", "/v1/sessions/{session_id}"),
    ("GET", "/v1/sessions/{session_id}/messages"),
    ("GET", "/v1/sessions/{session_id}/events"),
    ("POST", "/v1/sessions/{session_id}/turns"),
    ("GET", "/v1/sessions/{session_id}/proposals"),
    ("GET", "/v1/sessions/{session_id}/checkpoints"),
    ("POST", "/v1/sessions/{session_id}/rollback"),
    ("GET", "/v1/turns/{turn_id}"),
    ("GET", "/v1/turns/{turn_id}/events"),
    ("GET", "/v1/turns/{turn_id}/timeline"),
    ("POST", "/v1/turns/{turn_id}/cancel"),
    ("POST", "/v1/turns/{turn_id}/regenerate"),
    ("GET", "/v1/proposals/{proposal_id}"),
    ("POST", "/v1/proposals/{proposal_id}/confirm"),
    ("POST", "/v1/proposals/{proposal_id}/reject"),
}
"""The routes a session token may use (in its own session); every other one needs the key."""


def _token(client: Api, sid: str, scope: str = "chat", ttl_s: int = 600) -> str:
    r = client.http.post(f"/v1/sessions/{sid}/tokens", json={"ttl_s": ttl_s, "scope": scope})
    assert r.status_code == 201, r.text
    body = r.json()
    assert set(body) == {"token", "expires_at"}
    return str(body["token"])


def _error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, f"{r.request.method} {r.request.url}: {r.status_code} {r.text}"
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body
    return dict(body["error"])


def _as(api: Api, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=api.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


def _finished_session_with_proposal(client: Api) -> tuple[str, str, str]:
    sid = client.scripted_session({"text": "proposing", "tool_calls": [PROPOSE]}, {"text": "ok"})
    tid = client.submit(sid, "go")
    assert client.wait_turn(tid)["status"] == "done"
    pid = client.http.get(f"/v1/sessions/{sid}/proposals").json()[0]["id"]
    return sid, tid, pid


def test_a_token_of_another_session_gets_404_on_every_route(client: Api) -> None:
    sid, tid, pid = _finished_session_with_proposal(client)
    other = client.scripted_session({"text": "mine"})
    theirs = {"session_id": sid, "turn_id": tid, "proposal_id": pid}
    with client.as_tenant(_token(client, other)) as stranger:
        routes = _routes_with_ids(stranger)
        bodies = _bodies(stranger)
        for method, template in routes:
            ids = {name: str(uuid.uuid4()) for name in PATH_PARAM.findall(template)} | theirs
            r = _call(stranger, method, _fill(template, ids), bodies.get((method, template)))
            # another session's ids: as if they did not exist; a route tokens may not use: 401
            status = 404 if (method, template) in TOKEN_ROUTES else 401
            _error(r, status)
    assert set(routes) >= TOKEN_ROUTES
    assert client.turn(tid)["status"] == "done"
    assert client.http.get(f"/v1/proposals/{pid}").json()["status"] == "pending"


def test_a_chat_token_reads_posts_streams_and_decides_in_its_session(client: Api) -> None:
    sid = client.scripted_session({"text": "proposing", "tool_calls": [PROPOSE]}, {"text": "ok"})
    token = _token(client, sid, "chat")
    with _as(client, token) as http:
        assert http.get(f"/v1/sessions/{sid}").status_code == 200
        r = http.post(f"/v1/sessions/{sid}/turns", json={"content": "go"})
        assert r.status_code == 202, r.text
        tid = r.json()["id"]
        # EventSource's way: no header, the token in the query
        with httpx.stream(
            "GET", f"{client.base_url}/v1/turns/{tid}/events", params={"token": token}, timeout=30
        ) as stream:
            assert stream.status_code == 200
            names = []
            for event in parse_sse(stream.iter_lines()):
                names.append(event.event)
                if event.event == "done":
                    break
        assert "proposal" in names and names[-1] == "done"
        assert http.get(f"/v1/sessions/{sid}/messages").status_code == 200
        assert http.get(f"/v1/turns/{tid}").json()["status"] == "done"
        pid = http.get(f"/v1/sessions/{sid}/proposals").json()[0]["id"]
        assert http.post(f"/v1/proposals/{pid}/reject").json()["status"] == "rejected"
        with httpx.stream(
            "GET", f"{client.base_url}/v1/sessions/{sid}/events", params={"token": token}
        ) as stream:
            assert stream.status_code == 200
        # the tenant's routes are the key's alone
        for method, path in [
            ("POST", "/v1/sessions"),
            ("GET", "/v1/sessions"),
            ("GET", "/v1/providers"),
            ("GET", "/v1/tools"),
            ("POST", f"/v1/sessions/{sid}/tokens"),
        ]:
            _error(http.request(method, path, json={} if method == "POST" else None), 401)


def test_a_read_token_reads_but_cannot_act(client: Api) -> None:
    sid, tid, pid = _finished_session_with_proposal(client)
    with _as(client, _token(client, sid, "read")) as http:
        assert http.get(f"/v1/sessions/{sid}/messages").status_code == 200
        assert http.get(f"/v1/proposals/{pid}").status_code == 200
        assert (
            _error(http.post(f"/v1/sessions/{sid}/turns", json={"content": "x"}), 403)["code"]
            == "forbidden"
        )
        _error(http.post(f"/v1/turns/{tid}/cancel"), 403)
        _error(http.post(f"/v1/proposals/{pid}/confirm"), 403)
        _error(http.post(f"/v1/proposals/{pid}/reject"), 403)
    assert [m["role"] for m in client.messages(sid)].count("user") == 1
    assert client.http.get(f"/v1/proposals/{pid}").json()["status"] == "pending"


def _tampered(token: str, session_id: str) -> str:
    payload, _, signature = token.removeprefix("cwt_").partition(".")
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    body["s"] = session_id
    forged = base64.urlsafe_b64encode(json.dumps(body).encode()).rstrip(b"=").decode()
    return f"cwt_{forged}.{signature}"


def test_expired_tampered_and_foreign_tokens_answer_401(client: Api) -> None:
    sid = client.scripted_session({"text": "x"})
    other = client.scripted_session({"text": "y"})
    good = _token(client, other)
    grant_of = dict(json.loads(base64.urlsafe_b64decode(good[4:].split(".")[0] + "==")))
    tenant_id = uuid.UUID(grant_of["t"])
    expired = sign(SECRET, SessionGrant(tenant_id, uuid.UUID(sid), TokenScope.CHAT, 1))
    wrong_secret = sign(
        b"another", SessionGrant(tenant_id, uuid.UUID(sid), TokenScope.CHAT, int(time.time()) + 60)
    )
    # any process holding the secret signs tokens the API accepts: nothing is stored
    fresh = sign(SECRET, SessionGrant(tenant_id, uuid.UUID(sid), TokenScope.READ, 2**31))
    with _as(client, fresh) as http:
        assert http.get(f"/v1/sessions/{sid}").status_code == 200
        assert http.get(f"/v1/sessions/{other}").status_code == 404
    for bad in [expired, wrong_secret, _tampered(good, sid), good[:-3] + "abc", "cwt_garbage"]:
        with _as(client, bad) as http:
            _error(http.get(f"/v1/sessions/{sid}"), 401)
        r = httpx.get(f"{client.base_url}/v1/sessions/{sid}/events", params={"token": bad})
        _error(r, 401)
    assert (
        "expired"
        in _error(
            httpx.get(
                f"{client.base_url}/v1/sessions/{sid}",
                headers={"Authorization": f"Bearer {expired}"},
            ),
            401,
        )["message"]
    )


def test_query_tokens_only_on_the_event_streams(client: Api, tenant_key: str) -> None:
    sid = client.scripted_session({"text": "x"})
    token = _token(client, sid)
    base = client.base_url
    for path in [f"/v1/sessions/{sid}", f"/v1/sessions/{sid}/messages"]:
        message = _error(httpx.get(f"{base}{path}", params={"token": token}), 401)["message"]
        assert "event streams" in message
    r = httpx.post(
        f"{base}/v1/sessions/{sid}/turns", params={"token": token}, json={"content": "x"}
    )
    _error(r, 401)
    # an API key is never taken from the query
    _error(httpx.get(f"{base}/v1/sessions/{sid}/events", params={"token": tenant_key}), 401)


def test_token_values_never_reach_the_access_log(client: Api) -> None:
    sid = client.scripted_session({"text": "x"})
    token = _token(client, sid)
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    access = logging.getLogger("uvicorn.access")
    handler, level = Keep(), access.level
    access.addHandler(handler)
    access.setLevel(logging.INFO)
    try:
        httpx.get(f"{client.base_url}/v1/sessions/{sid}", params={"token": token})
        with httpx.stream(
            "GET", f"{client.base_url}/v1/sessions/{sid}/events", params={"token": token}
        ) as r:
            assert r.status_code == 200
    finally:
        access.removeHandler(handler)
        access.setLevel(level)
    logged = "\n".join(records)
    assert f"/v1/sessions/{sid}" in logged, logged
    assert "token=[redacted]" in logged
    assert token not in logged and token[4:20] not in logged


@pytest.mark.parametrize("body", [{"ttl_s": 0}, {"ttl_s": 10**9}, {"scope": "admin"}, {"x": 1}])
def test_token_requests_are_validated(client: Api, body: dict[str, Any]) -> None:
    sid = client.scripted_session({"text": "x"})
    _error(client.http.post(f"/v1/sessions/{sid}/tokens", json=body), 422)


def test_the_page_is_served_with_a_strict_content_security_policy(api: Api) -> None:
    r = httpx.get(f"{api.base_url}/ui")
    assert r.status_code == 307 and r.headers["location"].endswith("/ui/")
    page_files = sorted((Path(cortex_workers.api.__file__).parent / "ui").iterdir())
    assert len(page_files) > 5, page_files
    for path in ["/ui/", *(f"/ui/{f.name}" for f in page_files if f.name != "index.html")]:
        r = httpx.get(f"{api.base_url}{path}")
        assert r.status_code == 200, path
        csp = r.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp, csp
        assert "unsafe" not in csp and "http" not in csp
        assert r.headers["x-content-type-options"] == "nosniff"
    page = httpx.get(f"{api.base_url}/ui/").text
    assert "<script " not in page.replace('<script type="module" src="app.js"></script>', "")
    assert "style=" not in page and "http://" not in page and "https://" not in page


def test_a_session_token_may_not_set_the_user_or_the_route(client: Api) -> None:
    sid = client.scripted_session({"text": "hi"})
    token = _token(client, sid)
    with httpx.Client(base_url=str(client.http.base_url), timeout=30) as http:
        auth = {"Authorization": f"Bearer {token}"}
        for extra in ({"user": "someone-else"}, {"model": "auto"}, {"route": {"tier": "fast"}}):
            r = http.post(f"/v1/sessions/{sid}/turns", json={"content": "x", **extra}, headers=auth)
            _error(r, 403)
