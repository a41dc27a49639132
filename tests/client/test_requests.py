"""Retries that never create a second turn, and errors as typed exceptions."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fakes.tcp_proxy import TcpProxy

from cortex_workers.client import (
    Client,
    NotFound,
    SessionBusy,
    TurnFinished,
    Unauthorized,
    UnknownEvent,
)
from cortex_workers.client.events import TokenEvent, parse_event

SLOW = {"text": "one two three four five six seven eight nine ten", "token_ms": 300}


def test_a_turn_whose_response_was_dropped_is_created_once(
    cw: Client, cw_proxied: Client, proxy: TcpProxy
) -> None:
    session = cw.sessions.create(metadata={"script": [{"text": "only once"}]})
    proxy.drop_responses(2)
    accepted = cw_proxied.turns.create(session.id, "say it once")
    assert proxy.dropped == 2  # the API got the POST, the client never saw its answers
    answer = cw.turns.events(accepted.id).wait()
    assert answer.text == "only once"
    users = [m for m in cw.sessions.messages(session.id).messages if m.role == "user"]
    assert [m.content for m in users] == ["say it once"]
    assert cw.sessions.get(session.id).active_turn is None


def test_a_busy_session_raises_session_busy(cw: Client) -> None:
    session = cw.sessions.create(metadata={"script": [SLOW]})
    first = cw.turns.create(session.id, "count slowly")
    with pytest.raises(SessionBusy) as busy:
        cw.turns.create(session.id, "are you done?", if_busy="reject")
    assert busy.value.status == 409 and busy.value.code == "session_busy"
    assert busy.value.details == {"active_turn_id": first.id}
    assert cw.turns.cancel(first.id).status == "cancelled"
    with pytest.raises(TurnFinished) as finished:
        cw.turns.cancel(first.id)
    assert finished.value.code == "turn_finished"


def test_unknown_ids_and_keys_raise_typed_errors(cw: Client, api_base: str) -> None:
    with pytest.raises(NotFound) as missing:
        cw.turns.get(str(uuid.uuid4()))
    assert missing.value.status == 404 and missing.value.code == "not_found"
    with pytest.raises(NotFound):
        cw.sessions.get(str(uuid.uuid4()))
    with Client(api_base, "cw_not_a_key", max_retries=0) as stranger, pytest.raises(Unauthorized):
        stranger.sessions.create()


@pytest.fixture
def api_base(cw: Client) -> str:
    return str(cw.http.base_url).rstrip("/")


class _Flaky:
    """An HTTP server that answers 429 (Retry-After: 1), then 503, then 202, and records the
    Idempotency-Key and time of each request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str | None, float]] = []
        answers = [(429, {"Retry-After": "1"}), (503, {}), (202, {})]
        flaky = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (stdlib name)
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                flaky.requests.append((self.headers.get("Idempotency-Key"), time.monotonic()))
                status, headers = answers[min(len(flaky.requests), len(answers)) - 1]
                body = json.dumps(_accepted() if status == 202 else _error(status)).encode()
                self.send_response(status)
                for name, value in {**headers, "Content-Type": "application/json"}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"


def _accepted() -> dict[str, Any]:
    tid = str(uuid.uuid4())
    return {
        "id": tid,
        "session_id": str(uuid.uuid4()),
        "seq": 1,
        "status": "queued",
        "events_url": f"/v1/turns/{tid}/events",
    }


def _error(status: int) -> dict[str, Any]:
    code = {429: "rate_limited", 503: "unavailable"}[status]
    return {"error": {"code": code, "message": "later", "details": None}}


@pytest.fixture
def flaky() -> Iterator[_Flaky]:
    server = _Flaky()
    yield server
    server.server.shutdown()


def test_429_and_503_are_retried_with_the_same_idempotency_key(flaky: _Flaky) -> None:
    with Client(flaky.base_url, "k") as client:
        client.turns.create(str(uuid.uuid4()), "hello")
    keys = [key for key, _ in flaky.requests]
    assert len(keys) == 3 and keys[0] is not None and len(set(keys)) == 1
    assert flaky.requests[1][1] - flaky.requests[0][1] >= 1.0  # Retry-After was honoured


def test_retries_stop_at_max_retries(flaky: _Flaky) -> None:
    from cortex_workers.client import RateLimited

    with Client(flaky.base_url, "k", max_retries=0) as client, pytest.raises(RateLimited) as rl:
        client.turns.create(str(uuid.uuid4()), "hello")
    assert rl.value.retry_after_s == 1.0 and len(flaky.requests) == 1


def test_an_unknown_event_is_yielded_not_raised() -> None:
    event = parse_event("from_the_future", '{"x": 1}', "1001-3")
    assert isinstance(event, UnknownEvent)
    assert event.event == "from_the_future" and event.data == {"x": 1} and event.id == "1001-3"
    broken = parse_event("token", '{"text": 5}', "1001-4")  # a known name, unreadable data
    assert isinstance(broken, UnknownEvent)
    token = parse_event("token", '{"text": "hi ", "step": 2, "turn": "t1"}', "2:1001-0~0-0")
    assert token == TokenEvent(text="hi ", step=2, turn="t1", id="2:1001-0~0-0")


HTTPX_AND_PYDANTIC = {
    "httpx",
    "httpx_sse",
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "typing_extensions",
    "typing_inspection",
    # what httpx itself imports (its optional command line: click, rich, pygments)
    "idna",
    "certifi",
    "sniffio",
    "anyio",
    "h11",
    "httpcore",
    "click",
    "rich",
    "pygments",
    "markdown_it",
    "mdurl",
}


def test_importing_the_client_loads_no_server_dependency() -> None:
    code = (
        "import sys, json; before = set(sys.modules); import cortex_workers.client; "
        "print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(json.loads(out.stdout))
    for heavy in ("celery", "sqlalchemy", "fastapi", "redis", "psycopg", "starlette", "kombu"):
        assert heavy not in loaded
    ours = {m for m in loaded if m.split(".")[0] == "cortex_workers"}
    assert ours - {"cortex_workers", "cortex_workers.vocabulary"} == {
        m for m in ours if m.startswith("cortex_workers.client")
    }
    stdlib = set(sys.stdlib_module_names)
    third_party = {m.split(".")[0] for m in loaded if not m.startswith("_")} - stdlib
    assert third_party - {"cortex_workers"} <= HTTPX_AND_PYDANTIC, third_party


def test_budget_and_usage_follow_the_routes_of_the_budget_api() -> None:
    from cortex_workers.client import calls

    assert (calls.get_budget().method, calls.get_budget().path) == ("GET", "/v1/budget")
    usage = calls.get_usage(start="2026-11-01", end="2026-11-25", group_by="model")
    assert (usage.method, usage.path) == ("GET", "/v1/usage")
    assert usage.params == {"from": "2026-11-01", "to": "2026-11-25", "group_by": "model"}
    assert calls.get_usage(start=None, end=None, group_by=None).params == {}


def test_the_async_client_retries_with_the_same_idempotency_key(flaky: _Flaky) -> None:
    import asyncio

    from cortex_workers.client import AsyncClient

    async def submit() -> str:
        async with AsyncClient(flaky.base_url, "k") as client:
            return (await client.turns.create(str(uuid.uuid4()), "hello")).id

    asyncio.run(submit())
    keys = [key for key, _ in flaky.requests]
    assert len(keys) == 3 and keys[0] is not None and len(set(keys)) == 1


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (402, "budget_exhausted", "BudgetExhausted"),
        (409, "session_busy", "SessionBusy"),
        (409, "session_token_cap", "SessionTokenCap"),
        (409, "proposal_decided", "ProposalDecided"),
        (422, "idempotency_key_reused", "IdempotencyKeyReused"),
        (422, "unknown_tool", "InvalidRequest"),
        (429, "user_rate_limited", "UserRateLimited"),
        (404, "not_found", "NotFound"),
        (503, "unavailable", "ServiceUnavailable"),
        (500, "internal_error", "InternalServerError"),
    ],
)
def test_each_error_code_raises_its_class(status: int, code: str, expected: str) -> None:
    from cortex_workers.client.errors import error_for

    details = {"scope": "tenant"}
    error = error_for(status, {"error": {"code": code, "message": "m", "details": details}}, 3.0)
    assert type(error).__name__ == expected
    assert (error.code, error.status, error.details, error.retry_after_s) == (
        code,
        status,
        details,
        3.0,
    )
