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
SECRET_NAME = "tenant-A session"
PROPOSE = {
    "name": "propose_action",
    "arguments": {"action": "restart", "product": "x", "rationale": "y"},
}
METHODS = {"get", "post", "put", "patch", "delete"}
PATH_PARAM = re.compile(r"\{([^}]+)\}")
SOME_UUID = "00000000-0000-4000-8000-000000000000"
"""What the walk sends for an id in a body (the valid walk names a done turn instead)."""


def _spec(api: Api) -> dict[str, Any]:
    spec = api.http.get("/openapi.json")
    assert spec.status_code == 200, spec.text
    return dict(spec.json())


OPENAI_PATHS = ("/v1/responses", "/v1/conversations", "/v1/models")
"""The OpenAI-compatible routes: OpenAI's ids and error shape; tests/openai_compat checks that
another tenant's ids answer 404 there."""


def _routes_with_ids(api: Api) -> list[tuple[str, str]]:
    """Every (method, path) of the OpenAPI document whose path takes an id (our own routes)."""
    out: list[tuple[str, str]] = []
    for path, ops in _spec(api)["paths"].items():
        if PATH_PARAM.search(path) and not path.startswith(OPENAI_PATHS):
            out.extend((method.upper(), path) for method in ops if method in METHODS)
    return out


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        node: Any = spec
        for part in schema["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def _minimal(spec: dict[str, Any], schema: dict[str, Any]) -> Any:
    """The smallest value valid for `schema`: required properties only, first enum value."""
    schema = _resolve(spec, schema)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return _minimal(spec, schema[key][0])
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type", "object")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: _minimal(spec, props[name]) for name in schema.get("required", [])}
    if kind == "string" and schema.get("format") == "uuid":
        return SOME_UUID
    if kind == "string":
        return "x" * max(1, int(schema.get("minLength", 1)))
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    if kind == "array":
        return [_minimal(spec, schema["items"]) for _ in range(int(schema.get("minItems", 0)))]
    return None


def _bodies(api: Api) -> dict[tuple[str, str], Any]:
    """A valid JSON body for each route that takes one (built from its OpenAPI schema)."""
    spec = _spec(api)
    out: dict[tuple[str, str], Any] = {}
    for path, ops in spec["paths"].items():
        if path.startswith(OPENAI_PATHS):
            continue
        for method, op in ops.items():
            content = op.get("requestBody", {}).get("content", {})
            if "application/json" in content:
                out[(method.upper(), path)] = _minimal(spec, content["application/json"]["schema"])
    # a schedule needs one rule (`cron` or `every_s`), which the schema cannot say alone
    out[("POST", "/v1/sessions/{session_id}/schedules")] = {"content": "x", "every_s": 3600}
    return out


def _call(api: Api, method: str, path: str, body: Any = None) -> httpx.Response:
    """One request; an SSE route must answer before its first event, so read no stream."""
    with api.http.stream(method, path, json=body, timeout=15) as r:
        if r.status_code == 200 and r.headers.get("content-type", "").startswith(
            "text/event-stream"
        ):
            return r  # a live stream: the assertion on the status reports it; do not wait on it
        r.read()
        return r


def _fill(path: str, ids: dict[str, str]) -> str:
    return PATH_PARAM.sub(lambda m: ids[m.group(1)], path)


def _normalized(r: httpx.Response, *ids: str) -> str:
    text = r.text
    for i in ids:
        text = text.replace(i, "<ID>")
    return text


def _not_found(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 404, f"{r.request.method} {r.request.url}: {r.status_code} {r.text}"
    assert r.headers.get("content-type", "").startswith("application/json"), r.headers
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
        {"text": SECRET_ANSWER, "tool_calls": [PROPOSE]},
        {"text": SECRET_ANSWER},
        system_prompt=SECRET_PROMPT,
        name=SECRET_NAME,
    )
    tid = client.submit(sid, SECRET_CONTENT)
    before = client.wait_turn(tid)
    assert before["status"] == "done" and before["answer"] == SECRET_ANSWER
    proposals = client.http.get(f"/v1/sessions/{sid}/proposals").json()
    assert [p["status"] for p in proposals] == ["pending"], proposals
    pid = proposals[0]["id"]
    messages_before = client.messages(sid)
    job = {"instructions": "x", "input": SECRET_CONTENT, "result_schema": {"type": "object"}}
    job_id = client.http.post("/v1/jobs", json=job).json()["id"]
    batch = {"instructions": "x", "inputs": [SECRET_CONTENT], "result_schema": {"type": "object"}}
    batch_id = client.http.post("/v1/batches", json=batch).json()["id"]
    hook = {"url": "http://127.0.0.1:9/hooks", "events": ["job.completed"]}
    webhook_id = client.http.post("/v1/webhooks", json=hook).json()["id"]
    theirs_ids = {
        "session_id": sid,
        "turn_id": tid,
        "proposal_id": pid,
        "job_id": job_id,
        "batch_id": batch_id,
        "webhook_id": webhook_id,
        "task_id": _agent_task(client),
        "schedule_id": _schedule(client, sid),
    }

    routes = _routes_with_ids(other_client)
    bodies = _bodies(other_client)
    params = {p for _, path in routes for p in PATH_PARAM.findall(path)}
    assert params <= set(theirs_ids), f"ids the walk cannot fill: {params - set(theirs_ids)}"
    walked = []
    for method, template in routes:
        body = bodies.get((method, template))
        theirs = _call(other_client, method, _fill(template, theirs_ids), body)
        err = _not_found(theirs)
        # A's values B did not send appear nowhere, the one B sent only where an unknown id's would.
        sent = set(PATH_PARAM.findall(template))
        for secret in {v for k, v in theirs_ids.items() if k not in sent} | {
            SECRET_PROMPT,
            SECRET_CONTENT,
            SECRET_ANSWER,
            SECRET_NAME,
        }:
            assert secret not in theirs.text, (method, template, theirs.text)
        # and the answer is the one an id that exists nowhere gets: no existence oracle
        ghosts = {name: str(uuid.uuid4()) for name in theirs_ids}
        ghost = _call(other_client, method, _fill(template, ghosts), body)
        _not_found(ghost)
        assert _normalized(theirs, *theirs_ids.values()) == _normalized(ghost, *ghosts.values())
        assert set(err) == {"code", "message", "details"}
        walked.append((method, template))

    # coverage: every route of the OpenAPI document that takes an id, none left out
    assert set(walked) == set(routes) and len(walked) == len(routes), (walked, routes)
    assert len(walked) / len(routes) == 1.0
    assert {
        ("GET", "/v1/turns/{turn_id}/events"),
        ("GET", "/v1/sessions/{session_id}/events"),
        ("POST", "/v1/turns/{turn_id}/cancel"),
        ("POST", "/v1/sessions/{session_id}/turns"),
        ("GET", "/v1/proposals/{proposal_id}"),
        ("POST", "/v1/proposals/{proposal_id}/confirm"),
        ("POST", "/v1/proposals/{proposal_id}/reject"),
        ("GET", "/v1/jobs/{job_id}"),
        ("GET", "/v1/batches/{batch_id}/results"),
        ("DELETE", "/v1/webhooks/{webhook_id}"),
        ("GET", "/v1/webhooks/{webhook_id}/deliveries"),
    } <= set(walked)
    # B's DELETE removed nothing of A's
    assert [w["id"] for w in client.http.get("/v1/webhooks").json()] == [webhook_id]
    schedules = client.http.get(f"/v1/sessions/{sid}/schedules").json()["schedules"]
    assert [s["id"] for s in schedules] == [theirs_ids["schedule_id"]]
    assert client.http.delete(f"/v1/schedules/{theirs_ids['schedule_id']}").status_code == 204

    # A still sees its own turn and proposal, unchanged; B's POSTs created, cancelled and
    # decided nothing.
    after = client.turn(tid)
    assert after["status"] == "done"
    assert after["answer"] == before["answer"]
    assert after["finished_at"] == before["finished_at"]
    assert client.messages(sid) == messages_before
    session = client.http.get(f"/v1/sessions/{sid}").json()
    assert session["active_turn"] is None and session["queued_turns"] == 0
    assert client.http.get(f"/v1/proposals/{pid}").json() == proposals[0]


def _schedule(client: Api, sid: str) -> str:
    """A schedule of A's session (hourly, so it does not fire during the test)."""
    body = {"content": SECRET_CONTENT, "every_s": 3600}
    r = client.http.post(f"/v1/sessions/{sid}/schedules", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _agent_task(client: Api) -> str:
    """An agent task of A's (a finished foreground call of `lookup`)."""
    sid = client.scripted_session(
        {"tool_calls": [{"name": "lookup_agent", "arguments": {"task": SECRET_CONTENT}}]},
        {"text": "ok"},
        agents=["lookup"],
        tools=[],
    )
    assert client.wait_turn(client.submit(sid, "call it"))["status"] == "done"
    (task,) = client.http.get(f"/v1/sessions/{sid}/tasks").json()
    return str(task["id"])


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
    ids = r"\{(session_id|turn_id|proposal_id|job_id|batch_id|webhook_id|task_id|schedule_id)\}"
    assert all(re.search(ids, p) for _, p in routes)
    assert {
        ("GET", "/v1/sessions/{session_id}"),
        ("GET", "/v1/sessions/{session_id}/messages"),
        ("POST", "/v1/sessions/{session_id}/turns"),
        ("GET", "/v1/sessions/{session_id}/events"),
        ("GET", "/v1/sessions/{session_id}/proposals"),
        ("GET", "/v1/turns/{turn_id}"),
        ("GET", "/v1/turns/{turn_id}/events"),
        ("POST", "/v1/turns/{turn_id}/cancel"),
        ("GET", "/v1/proposals/{proposal_id}"),
        ("POST", "/v1/proposals/{proposal_id}/confirm"),
        ("POST", "/v1/proposals/{proposal_id}/reject"),
        ("GET", "/v1/sessions/{session_id}/tasks"),
        ("POST", "/v1/tasks/{task_id}/cancel"),
    } <= set(routes)


def test_the_walk_builds_a_valid_body_for_every_route_that_takes_one(client: Api) -> None:
    bodies = _bodies(client)
    assert bodies[("POST", "/v1/sessions/{session_id}/turns")] == {"content": "x"}
    sid = client.scripted_session({"text": "ok"})
    done = client.submit(sid, "a checkpoint to name")
    client.wait_turn(done)
    for (method, template), minimal in bodies.items():
        body = {k: done if v == SOME_UUID else v for k, v in minimal.items()}
        if PATH_PARAM.search(template):
            r = client.http.request(method, _fill(template, {"session_id": sid}), json=body)
            assert r.status_code < 300, (method, template, body, r.text)
            if template.endswith("/turns"):
                assert client.wait_turn(r.json()["id"])["status"] == "done"
