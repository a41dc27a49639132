"""Malformed and hostile requests: each answers a 4xx in the error shape, never a 500."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support import Api

MAX_BYTES = 65536  # CORTEX_REQUEST_MAX_BYTES of the test stack
SLOW = {"text": "slow reply here", "first_token_ms": 3000}


def assert_error(r: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    """The response has `status` and the body `{"error": {"code", "message", "details"}}`."""
    assert r.status_code == status, f"{r.request.method} {r.request.url}: {r.status_code} {r.text}"
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body = r.json()
    assert isinstance(body, dict) and set(body) == {"error"}, body
    err = body["error"]
    assert isinstance(err, dict), body
    assert isinstance(err.get("code"), str) and err["code"], body
    assert isinstance(err.get("message"), str) and err["message"], body
    assert "details" in err, body
    if code is not None:
        assert err["code"] == code, body
    return dict(err)


def assert_client_error(r: httpx.Response) -> dict[str, Any]:
    """Some 4xx in the error shape."""
    assert 400 <= r.status_code < 500, (
        f"{r.request.method} {r.request.url}: {r.status_code} {r.text}"
    )
    return assert_error(r, r.status_code)


def locs(err: dict[str, Any]) -> list[list[Any]]:
    return [d["loc"] for d in err["details"]]


@pytest.fixture
def sid(client: Api) -> str:
    return str(client.create_session(name="errors")["id"])


# --- bodies ------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [b"{", b'{"content": "x",}', b"not json", b"{'content': 'x'}"])
def test_invalid_json_body_is_422_in_shape(client: Api, sid: str, raw: bytes) -> None:
    headers = {"Content-Type": "application/json"}
    r = client.http.post(f"/v1/sessions/{sid}/turns", content=raw, headers=headers)
    err = assert_error(r, 422, "validation_error")
    assert any(d["type"] == "json_invalid" for d in err["details"]), err
    r = client.http.post("/v1/sessions", content=raw, headers=headers)
    assert_error(r, 422, "validation_error")
    assert client.messages(sid) == []


@pytest.mark.parametrize("raw", [b"\xff\xfe\x00", b'{"content": "\xc3\x28"}'])
def test_a_body_that_is_not_utf8_is_400_in_shape(client: Api, sid: str, raw: bytes) -> None:
    headers = {"Content-Type": "application/json"}
    r = client.http.post(f"/v1/sessions/{sid}/turns", content=raw, headers=headers)
    assert_error(r, 400, "bad_request")
    r = client.http.post("/v1/sessions", content=raw, headers=headers)
    assert_error(r, 400, "bad_request")


@pytest.mark.parametrize(
    ("content_type", "raw"),
    [
        ("application/x-www-form-urlencoded", b"content=hello"),
        ("text/plain", b'{"content": "hello"}'),
        ("multipart/form-data; boundary=x", b"--x\r\n\r\nhello\r\n--x--\r\n"),
    ],
)
def test_a_body_that_is_not_sent_as_json_is_422_naming_the_content_type(
    client: Api, sid: str, content_type: str, raw: bytes
) -> None:
    r = client.http.post(
        f"/v1/sessions/{sid}/turns", content=raw, headers={"Content-Type": content_type}
    )
    err = assert_error(r, 422, "validation_error")
    media = content_type.split(";")[0]
    assert f"Content-Type: {media}" in err["message"], err
    assert "application/json" in err["message"], err
    assert client.messages(sid) == []


def test_a_json_array_instead_of_an_object_is_422(client: Api, sid: str) -> None:
    assert_error(client.http.post("/v1/sessions", json=[{"name": "x"}]), 422, "validation_error")
    r = client.http.post(f"/v1/sessions/{sid}/turns", json=[{"content": "x"}])
    assert_error(r, 422, "validation_error")


def test_a_missing_body_is_422(client: Api, sid: str) -> None:
    assert_error(client.http.post(f"/v1/sessions/{sid}/turns"), 422, "validation_error")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"content": 5}, "content"),
        ({"content": ["hello"]}, "content"),
        ({"content": None}, "content"),
        ({"content": "x", "if_busy": 1}, "if_busy"),
    ],
)
def test_wrong_types_in_a_turn_are_422_naming_the_field(
    client: Api, sid: str, body: dict[str, Any], field: str
) -> None:
    err = assert_error(client.http.post(f"/v1/sessions/{sid}/turns", json=body), 422)
    assert ["body", field] in locs(err)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": 5}, "name"),
        ({"tools": "calculate"}, "tools"),
        ({"tools": [1, 2]}, "tools"),
        ({"metadata": []}, "metadata"),
        ({"metadata": "x"}, "metadata"),
        ({"system_prompt": {"a": 1}}, "system_prompt"),
        ({"provider": ""}, "provider"),
        ({"name": "x" * 201}, "name"),
    ],
)
def test_wrong_types_in_a_session_are_422_naming_the_field(
    client: Api, body: dict[str, Any], field: str
) -> None:
    err = assert_error(client.http.post("/v1/sessions", json=body), 422, "validation_error")
    assert any(loc[:2] == ["body", field] for loc in locs(err)), err


def test_unknown_fields_are_refused(client: Api, sid: str) -> None:
    err = assert_error(client.http.post("/v1/sessions", json={"nmae": "typo"}), 422)
    assert ["body", "nmae"] in locs(err)
    r = client.http.post(f"/v1/sessions/{sid}/turns", json={"content": "x", "role": "system"})
    err = assert_error(r, 422)
    assert ["body", "role"] in locs(err)


def test_empty_content_is_422(client: Api, sid: str) -> None:
    err = assert_error(client.post_turn(sid, ""), 422, "validation_error")
    assert ["body", "content"] in locs(err)


@pytest.mark.parametrize("value", ["later", "REJECT", "", "enqueue "])
def test_an_unknown_if_busy_is_422(client: Api, sid: str, value: str) -> None:
    err = assert_error(client.post_turn(sid, "x", if_busy=value), 422)
    assert ["body", "if_busy"] in locs(err)


@pytest.mark.parametrize(
    "metadata",
    [
        {"script": "x"},
        {"script": {"text": "hi"}},
        {"script": [{"bogus": 1}]},
        {"script": [1]},
        {"script": ["hi"]},
        {"script": [{"text": 5}]},
        {"script": [{"tool_calls": "calculate"}]},
        {"script": [{"tool_calls": [{"arguments": {}}]}]},
        {"script": [{"first_token_ms": -1}]},
        {"script": [{"error": {"status": 9999}}]},
        {"script": [{"error": {"status": 500, "times": 0}}]},
    ],
)
def test_a_malformed_script_is_422(client: Api, metadata: dict[str, Any]) -> None:
    err = assert_error(client.http.post("/v1/sessions", json={"metadata": metadata}), 422)
    assert any(loc[:2] == ["body", "metadata"] for loc in locs(err)), err


def test_an_unknown_provider_is_422_and_lists_the_known_ones(client: Api) -> None:
    r = client.http.post("/v1/sessions", json={"provider": "no-such-provider"})
    err = assert_error(r, 422, "unknown_provider")
    assert "scripted" in err["details"]["providers"]
    assert "no-such-provider" not in err["details"]["providers"]


@pytest.mark.parametrize(
    ("provider", "model"), [("ollama", "llama3.1*"), ("openai", "gpt-*"), (None, "o[0-9]*")]
)
def test_a_model_pattern_is_not_a_model(client: Api, provider: str | None, model: str) -> None:
    body = {"model": model} | ({"provider": provider} if provider else {})
    err = assert_error(client.http.post("/v1/sessions", json=body), 422, "invalid_model")
    assert f"model {model!r} is a pattern" in err["message"], err
    assert err["details"]["model"] == model
    listed = client.http.get("/v1/providers").json()
    ollama = next(p for p in listed if p["name"] == "ollama")
    assert "llama3.1*" in ollama["model_patterns"]
    assert not [m for p in listed for m in p["models"] if any(c in m for c in "*?[")]


def test_an_unknown_tool_is_422_and_names_it(client: Api) -> None:
    r = client.http.post("/v1/sessions", json={"tools": ["calculate", "rm_rf"]})
    err = assert_error(r, 422, "unknown_tool")
    assert err["details"]["unknown"] == ["rm_rf"]


# --- ids and paths ---------------------------------------------------------------------------

ID_ROUTES = [
    ("GET", "/v1/sessions/{sid}"),
    ("GET", "/v1/sessions/{sid}/messages"),
    ("POST", "/v1/sessions/{sid}/turns"),
    ("GET", "/v1/sessions/{sid}/events"),
    ("GET", "/v1/turns/{tid}"),
    ("GET", "/v1/turns/{tid}/events"),
    ("POST", "/v1/turns/{tid}/cancel"),
]


def _send(client: Api, method: str, path: str) -> httpx.Response:
    body = {"content": "x"} if path.endswith("/turns") else None
    if path.endswith("/events"):
        with client.http.stream(method, path, timeout=10) as r:
            if r.status_code == 200:  # a stream that would never end: do not read it
                return r
            r.read()
            return r
    return client.http.request(method, path, json=body)


@pytest.mark.parametrize(("method", "template"), ID_ROUTES)
@pytest.mark.parametrize("bad", ["not-a-uuid", "123", "00000000-0000-0000-0000-00000000000g"])
def test_a_non_uuid_path_id_is_422(client: Api, method: str, template: str, bad: str) -> None:
    path = template.format(sid=bad, tid=bad)
    err = assert_error(_send(client, method, path), 422, "validation_error")
    assert any(loc[0] == "path" for loc in locs(err)), err


@pytest.mark.parametrize(("method", "template"), ID_ROUTES)
def test_an_unknown_uuid_is_404(client: Api, method: str, template: str) -> None:
    unknown = str(uuid.uuid4())
    path = template.format(sid=unknown, tid=unknown)
    err = assert_error(_send(client, method, path), 404, "not_found")
    assert unknown in err["message"]


def test_an_unknown_route_is_404_in_shape(client: Api) -> None:
    assert_error(client.http.get("/v1/nothing-here"), 404, "not_found")
    assert_error(client.http.post("/v2/sessions", json={}), 404, "not_found")
    assert_error(client.http.get(f"/v1/sessions/{uuid.uuid4()}/nope"), 404, "not_found")


def test_a_wrong_method_is_405_in_shape(client: Api, sid: str) -> None:
    for method, path in [
        ("DELETE", f"/v1/sessions/{sid}"),
        ("PUT", "/v1/sessions"),
        ("PATCH", "/v1/sessions"),
        ("GET", f"/v1/turns/{uuid.uuid4()}/cancel"),
        ("POST", "/healthz"),
    ]:
        r = client.http.request(method, path)
        assert_error(r, 405, "method_not_allowed")
        assert "allow" in r.headers


# --- authentication ----------------------------------------------------------------------------


@pytest.fixture
def anon(api: Api) -> Iterator[httpx.Client]:
    """A client that sends no Authorization header."""
    with httpx.Client(base_url=api.base_url, timeout=30) as http:
        yield http


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/sessions"),
        ("GET", "/v1/providers"),
        ("GET", "/v1/tools"),
        *[(m, p.format(sid=uuid.uuid4(), tid=uuid.uuid4())) for m, p in ID_ROUTES],
    ],
)
def test_a_missing_authorization_is_401_with_www_authenticate(
    anon: httpx.Client, method: str, path: str
) -> None:
    body = {"content": "x"} if path.endswith("/turns") else ({} if method == "POST" else None)
    r = anon.request(method, path, json=body)
    assert_error(r, 401, "unauthorized")
    assert r.headers.get("www-authenticate", "").lower().startswith("bearer")


@pytest.mark.parametrize(
    "authorization",
    [
        "Basic dXNlcjpwYXNz",
        "Token abc",
        "Bearer",
        "Bearer garbage",
        "Bearer " + "k" * 500,
        "bearer ck_definitely_not_a_key",
    ],
)
def test_a_wrong_scheme_or_unknown_key_is_401(anon: httpx.Client, authorization: str) -> None:
    r = anon.get("/v1/providers", headers={"Authorization": authorization})
    assert_error(r, 401, "unauthorized")
    assert r.headers.get("www-authenticate", "").lower().startswith("bearer")


def test_a_valid_key_with_another_scheme_is_401(anon: httpx.Client, tenant_key: str) -> None:
    r = anon.get("/v1/providers", headers={"Authorization": f"Basic {tenant_key}"})
    assert_error(r, 401, "unauthorized")
    r = anon.get("/v1/providers", headers={"Authorization": f"Bearer {tenant_key}"})
    assert r.status_code == 200, r.text


def test_a_session_route_checks_authentication_before_the_path(anon: httpx.Client) -> None:
    assert_error(anon.get("/v1/sessions/not-a-uuid"), 401, "unauthorized")


# --- body size ---------------------------------------------------------------------------------


def test_a_body_over_the_limit_with_content_length_is_413(client: Api, sid: str) -> None:
    body = json.dumps({"content": "x" * (MAX_BYTES + 10)}).encode()
    r = client.http.post(
        f"/v1/sessions/{sid}/turns", content=body, headers={"Content-Type": "application/json"}
    )
    err = assert_error(r, 413, "payload_too_large")
    assert err["details"] == {"max_bytes": MAX_BYTES}
    r = client.http.post("/v1/sessions", json={"system_prompt": "p" * (MAX_BYTES + 1)})
    assert_error(r, 413, "payload_too_large")
    assert client.messages(sid) == []


def test_a_chunked_body_over_the_limit_without_content_length_is_413(client: Api, sid: str) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"content": "'
        for _ in range(100):
            yield b"y" * 1024
        yield b'"}'

    r = client.http.post(
        f"/v1/sessions/{sid}/turns", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert "content-length" not in r.request.headers
    assert r.request.headers.get("transfer-encoding") == "chunked"
    assert_error(r, 413, "payload_too_large")
    assert client.messages(sid) == []


def test_a_chunked_body_under_the_limit_is_accepted(client: Api) -> None:
    sid = client.scripted_session({"text": "ok"})

    def chunks() -> Iterator[bytes]:
        yield b'{"content": "'
        yield b"z" * 1000
        yield b'"}'

    r = client.http.post(
        f"/v1/sessions/{sid}/turns", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 202, r.text
    assert client.wait_turn(r.json()["id"])["status"] == "done"


# --- query parameters and headers ---------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": 100000},
        {"limit": -5},
        {"limit": "ten"},
        {"after": -1},
        {"after": 99999999999},
        {"after": "1.5"},
        {"after": "9" * 400},
    ],
)
def test_out_of_range_paging_is_422(client: Api, sid: str, params: dict[str, Any]) -> None:
    err = assert_error(
        client.http.get(f"/v1/sessions/{sid}/messages", params=params), 422, "validation_error"
    )
    assert any(loc[0] == "query" and loc[1] in params for loc in locs(err)), err


def test_an_idempotency_key_of_300_chars_is_422(client: Api, sid: str) -> None:
    r = client.post_turn(sid, "x", headers={"Idempotency-Key": "k" * 300})
    err = assert_error(r, 422, "validation_error")
    assert any(loc[0] == "header" for loc in locs(err)), err
    assert client.messages(sid) == []


def test_an_empty_idempotency_key_is_422(client: Api, sid: str) -> None:
    r = client.post_turn(sid, "x", headers={"Idempotency-Key": ""})
    assert_error(r, 422, "validation_error")
    assert client.messages(sid) == []


def test_an_idempotency_key_reused_on_another_session_is_422(client: Api) -> None:
    key = {"Idempotency-Key": f"key-{uuid.uuid4()}"}
    first_sid = client.scripted_session({"text": "one"})
    other_sid = client.scripted_session({"text": "two"})
    tid = client.submit(first_sid, "same words", headers=key)
    reused = client.post_turn(other_sid, "same words", headers=key)
    assert tid not in reused.text and first_sid not in reused.text  # nothing of the other one
    err = assert_error(reused, 422, "idempotency_key_reused")
    assert err["details"] is None
    client.wait_turn(tid)
    assert client.messages(other_sid) == []


def test_an_idempotency_key_reused_with_another_body_is_422(client: Api) -> None:
    sid = client.scripted_session({"text": "one"}, {"text": "two"})
    key = {"Idempotency-Key": f"key-{uuid.uuid4()}"}
    first = client.post_turn(sid, "the question", headers=key)
    assert first.status_code == 202, first.text
    tid = first.json()["id"]

    again = client.post_turn(sid, "the question", headers=key)
    assert again.status_code == 202, again.text
    assert again.json()["id"] == tid

    other = client.post_turn(sid, "another question", headers=key)
    err = assert_error(other, 422, "idempotency_key_reused")
    assert err["details"]["turn_id"] == tid
    other = client.post_turn(sid, "the question", headers=key, if_busy="reject")
    assert_error(other, 422, "idempotency_key_reused")

    client.wait_turn(tid)
    users = [m for m in client.messages(sid) if m["role"] == "user"]
    assert [m["content"] for m in users] == ["the question"]


@pytest.mark.parametrize("value", ["garbage", "1-", "-1", "abc-def", "1001-3-4"])
def test_a_malformed_last_event_id_is_422(client: Api, value: str) -> None:
    sid = client.scripted_session({"text": "ok"})
    tid = client.submit(sid)
    r = client.http.get(f"/v1/turns/{tid}/events", headers={"Last-Event-ID": value})
    assert_error(r, 422, "invalid_last_event_id")
    r = client.http.get(f"/v1/sessions/{sid}/events", headers={"Last-Event-ID": value})
    assert_error(r, 422, "invalid_last_event_id")
    client.wait_turn(tid)


# --- conflicts ---------------------------------------------------------------------------------


def test_if_busy_reject_on_a_busy_session_is_409(client: Api) -> None:
    sid = client.scripted_session(SLOW)
    busy = client.submit(sid, "take your time")
    r = client.post_turn(sid, "me too", if_busy="reject")
    err = assert_error(r, 409, "session_busy")
    assert err["details"]["active_turn_id"] == busy
    assert [m["content"] for m in client.messages(sid) if m["role"] == "user"] == ["take your time"]
    client.http.post(f"/v1/turns/{busy}/cancel")
    client.wait_turn(busy)


def test_cancelling_a_finished_turn_is_409(client: Api) -> None:
    sid = client.scripted_session({"text": "done already"})
    tid = client.submit(sid)
    assert client.wait_turn(tid)["status"] == "done"
    err = assert_error(client.http.post(f"/v1/turns/{tid}/cancel"), 409, "turn_finished")
    assert err["details"]["status"] == "done"
    assert client.turn(tid)["status"] == "done"


# --- health, readiness, docs ---------------------------------------------------------------------


def test_healthz_is_200_without_a_key(anon: httpx.Client) -> None:
    r = anon.get("/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


def test_readyz_reports_database_redis_and_broker_ok(anon: httpx.Client) -> None:
    r = anon.get("/readyz")
    assert r.status_code == 200, r.text
    assert r.json() == {
        "status": "ok",
        "checks": {"database": "ok", "redis": "ok", "broker": "ok"},
    }


DESIGN_PATHS = {
    "/v1/sessions": {"post"},
    "/v1/sessions/{session_id}": {"get"},
    "/v1/sessions/{session_id}/messages": {"get"},
    "/v1/sessions/{session_id}/turns": {"post"},
    "/v1/turns/{turn_id}": {"get"},
    "/v1/turns/{turn_id}/events": {"get"},
    "/v1/sessions/{session_id}/events": {"get"},
    "/v1/turns/{turn_id}/cancel": {"post"},
    "/v1/providers": {"get"},
    "/v1/tools": {"get"},
    "/healthz": {"get"},
    "/readyz": {"get"},
}


def test_docs_and_openapi_list_every_route_of_the_design(anon: httpx.Client) -> None:
    docs = anon.get("/docs")
    assert docs.status_code == 200
    assert "text/html" in docs.headers["content-type"]
    assert "openapi.json" in docs.text
    spec = anon.get("/openapi.json")
    assert spec.status_code == 200
    paths = spec.json()["paths"]
    for path, methods in DESIGN_PATHS.items():
        assert path in paths, f"{path} missing from /openapi.json: {sorted(paths)}"
        assert methods <= set(paths[path]), (path, sorted(paths[path]))


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_load_every_asset_from_the_api_itself(anon: httpx.Client, page: str) -> None:
    """Offline, a page that loads a script or a style from a CDN is blank."""
    html = anon.get(page)
    assert html.status_code == 200 and "text/html" in html.headers["content-type"]
    assets = re.findall(r'(?:src|href)=["\']([^"\']+)["\']', html.text)
    assert assets, html.text
    for url in assets:
        assert url.startswith("/"), f"{page} loads {url} from elsewhere"
        asset = anon.get(url)
        assert asset.status_code == 200, url
        assert len(asset.content) > 100, url
    assert "@import" not in html.text and "//fonts." not in html.text


# --- hostile bodies ----------------------------------------------------------------------------

DEEP = "[" * 200 + "]" * 200
DEEPER = "[" * 5000 + "]" * 5000

# Raw JSON texts that no JSON-body route may accept.
JUNK = [
    "null",
    "true",
    "0",
    "-1",
    "1e999",
    "9" * 5000,
    '"a string"',
    '"\\u0000"',
    "[]",
    "[null]",
    DEEP,
    DEEPER,
    '{"": null}',
    '{"\\u0000": 1}',
    '{"content": null, "if_busy": null}',
    '{"content": 123456789012345678901234567890}',
    '{"content": 1e309}',
    '{"content": {"nested": [1, [2, [3]]]}}',
    '{"content": ' + DEEP + "}",
    '{"content": "x", "if_busy": ' + DEEP + "}",
    '{"content": "x", "if_busy": "\\u0000"}',
    '{"content": "x", "extra": ' + DEEP + "}",
    '{"name": "x", "tools": [null]}',
    '{"tools": ' + DEEP + "}",
    '{"metadata": null}',
    '{"metadata": {"script": ' + DEEP + "}}",
    '{"metadata": {"script": [{"text": "hi", "first_token_ms": ' + "9" * 400 + "}]}}",
    '{"metadata": {"script": [{"error": {"status": 1e999}}]}}',
    '{"provider": "\\u0000"}',
    '{"content": "x", "content": 5}',
    '{"content": "\\ud800"}',
]

# Valid-looking JSON whose values are hostile; a route may accept these, but never with a 5xx.
HOSTILE = [
    '{"content": "\\u0000"}',
    '{"content": "nul \\u0000 in the middle"}',
    '{"content": "x", "if_busy": "enqueue"}',
    '{"name": "nul \\u0000 name"}',
    '{"system_prompt": "\\u0000"}',
    '{"model": "\\u0000"}',
    '{"metadata": {"\\u0000": "\\u0000"}}',
    '{"metadata": {"deep": ' + DEEP + "}}",
    '{"metadata": {"n": ' + "9" * 400 + "}}",
    '{"metadata": {"n": ' + "9" * 5000 + "}}",
    '{"metadata": {"f": 1e999}}',
    '{"metadata": {"f": -1e999}}',
    '{"metadata": {"f": NaN}}',
    '{"metadata": {"f": Infinity}}',
    '{"metadata": {"big": 123456789012345678901234567890}}',
    '{"name": "\\ud800"}',
    '{"content": "\\udfff lone surrogate"}',
]


@pytest.fixture
def json_routes(client: Api) -> list[str]:
    sid = client.scripted_session(*[{"text": "ok"}] * 40)
    return ["/v1/sessions", f"/v1/sessions/{sid}/turns"]


def _post_raw(client: Api, path: str, raw: str) -> httpx.Response:
    return client.http.post(
        path,
        content=raw.encode("utf-8", "surrogatepass"),
        headers={"Content-Type": "application/json"},
    )


def test_junk_bodies_are_4xx_in_shape_on_every_json_route(
    client: Api, json_routes: list[str]
) -> None:
    failures = []
    for path in json_routes:
        for raw in JUNK:
            r = _post_raw(client, path, raw)
            if not (400 <= r.status_code < 500):
                failures.append(f"POST {path} {raw[:60]!r} -> {r.status_code} {r.text[:120]}")
                continue
            assert_error(r, r.status_code)
    assert not failures, "\n".join(failures)


def test_hostile_bodies_are_never_a_5xx_on_any_json_route(
    client: Api, json_routes: list[str]
) -> None:
    failures = []
    for path in json_routes:
        for raw in HOSTILE:
            r = _post_raw(client, path, raw)
            if r.status_code >= 500:
                failures.append(f"POST {path} {raw[:60]!r} -> {r.status_code} {r.text[:120]}")
            elif r.status_code >= 400:
                assert_error(r, r.status_code)
            else:
                assert r.status_code in (201, 202), r.text
    assert not failures, "\n".join(failures)


def test_a_nul_byte_in_content_is_refused_or_stored_never_a_5xx(client: Api) -> None:
    sid = client.scripted_session({"text": "ok"})
    r = client.post_turn(sid, "before\u0000after")
    assert r.status_code < 500, r.text
    if r.status_code == 202:
        client.wait_turn(r.json()["id"])
        users = [m["content"] for m in client.messages(sid) if m["role"] == "user"]
        assert len(users) == 1 and users[0].startswith("before")
    else:
        assert_error(r, 422)


def test_a_nul_byte_in_session_fields_is_refused_or_stored_never_a_5xx(client: Api) -> None:
    failures = []
    for body in (
        {"name": "a\u0000b"},
        {"system_prompt": "a\u0000b"},
        {"model": "a\u0000b"},
        {"metadata": {"k": "a\u0000b"}},
        {"metadata": {"a\u0000b": 1}},
    ):
        r = client.http.post("/v1/sessions", json=body)
        if r.status_code >= 500:
            failures.append(f"POST /v1/sessions {body!r} -> {r.status_code} {r.text[:120]}")
        elif r.status_code != 201:
            assert_error(r, 422)
    assert not failures, "\n".join(failures)
