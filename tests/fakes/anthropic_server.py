"""A fake Anthropic Messages API: real HTTP on a loopback port, the streaming wire protocol.

`FakeAnthropic().start()` returns a base URL for `anthropic.Anthropic(base_url=...)`. Requests
are recorded (`requests`, `requests_for(key)`); replies come from a scenario registry keyed by
the text of the first user message of each request: `enqueue(key, *responses)` queues
responses, each request for that key pops the next one, and with none queued the fake echoes
the last user text; `answer_by_position(key, *responses)` answers by the number of assistant
messages in the request instead, so a request sent again gets the same answer. A response
is a dict, every key optional:

- `text`: streamed as several `text_delta`s; `tool_calls`: `[{"name", "arguments", "id",
  "raw_arguments"}]`, each a `tool_use` block whose JSON arrives as several `input_json_delta`
  fragments (`raw_arguments` sends that exact string instead of `arguments` as JSON);
- `usage`: `{"input", "output", "cache_read", "cache_write"}`; `stop_reason`: overrides the
  default (`tool_use` with tool calls, else `end_turn`);
- `status` (with optional `error: {"type", "message"}`): an HTTP error response;
  `headers`: extra response headers;
- `error_mid_stream`: after the text, an `event: error` (default `overloaded_error`);
  `drop_mid_stream`: after the text, the connection closes mid-body;
  `truncate_mid_stream`: after the text, the body ends cleanly but without `message_stop`;
- `delay_s`: before the response headers; `chunk_delay_s`: between events.

Written on the standard library's threaded HTTP server, so each SSE event leaves as its own
HTTP chunk and a dropped connection is a real one.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import uuid
from collections import defaultdict, deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class ReceivedRequest:
    """One request as the fake saw it; `headers` has lower-case names."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    auth: str | None
    """`x-api-key`, `bearer`, or None: which credential header the client sent."""

    @property
    def key(self) -> str:
        return first_user_text(self.body.get("messages") or [])


def _text_of(content: Any, *, last: bool = False) -> str:
    """String content, or the text of its first (or last) text block."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        for block in reversed(content) if last else content:
            if isinstance(block, dict) and block.get("type") == "text":
                return str(block.get("text", ""))
    return ""


def first_user_text(messages: list[Any]) -> str:
    """The scenario key: the first user message's text (string content or first text block)."""
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "user":
            return _text_of(m.get("content"))
    return ""


def last_user_text(messages: list[Any]) -> str:
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            text = _text_of(m.get("content"), last=True)
            if text:
                return text
    return ""


def pieces(text: str, n: int = 3) -> list[str]:
    """`text` cut into about `n` pieces (at least two when it has two characters)."""
    if len(text) < 2:
        return [text] if text else []
    size = max(1, -(-len(text) // n))
    return [text[i : i + size] for i in range(0, len(text), size)]


def conversation_problem(messages: Any) -> str | None:
    """What the real API would reject about `messages` (roles, tool results), or None."""
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    previous_tool_ids: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: must be user or assistant"
        if i == 0 and role != "user":
            return "messages: first message must use the user role"
        if i and messages[i - 1].get("role") == role:
            return "messages: roles must alternate between user and assistant"
        content = m.get("content")
        blocks = content if isinstance(content, list) else []
        for block in blocks:
            if block.get("type") == "tool_result" and block.get("tool_use_id") not in (
                previous_tool_ids
            ):
                return f"messages.{i}: tool_result without a matching tool_use"
        previous_tool_ids = {b["id"] for b in blocks if b.get("type") == "tool_use"}
    return None


class FakeAnthropic:
    """A threaded fake of `POST /v1/messages` (streaming only). Thread-safe."""

    def __init__(self, *, api_key: str | None = None, model: str = "claude-fake-1") -> None:
        self.api_key = api_key
        """When set, any other credential gets 401 `authentication_error`."""
        self.model = model
        self._lock = threading.Lock()
        self._scenarios: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
        self._by_position: dict[str, tuple[dict[str, Any], ...]] = {}
        self._requests: list[ReceivedRequest] = []
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> str:
        """Serve on 127.0.0.1 and an ephemeral port; returns the base URL."""
        fake = self

        class Handler(_Handler):
            owner = fake

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, daemon=True, name="fake-anthropic"
        )
        self._thread.start()
        return self.base_url

    @property
    def base_url(self) -> str:
        assert self._server is not None, "FakeAnthropic is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        """Stop serving; delays in progress end at once."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
        self._server = self._thread = None

    def __enter__(self) -> FakeAnthropic:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scenarios and records -------------------------------------------------------------

    def enqueue(self, key: str, *responses: dict[str, Any]) -> None:
        """Queue responses for requests whose first user message's text is `key`."""
        with self._lock:
            self._scenarios[key].extend(responses)

    def answer_by_position(self, key: str, *responses: dict[str, Any]) -> None:
        """Answer requests for `key` by where they are in the conversation: a request holding
        N assistant messages gets `responses[N]` (past the end, the default). Unlike `enqueue`,
        a request sent again (a step restarted after its lease lapsed) gets the same answer."""
        with self._lock:
            self._by_position[key] = responses

    def reset(self) -> None:
        with self._lock:
            self._scenarios.clear()
            self._by_position.clear()
            self._requests.clear()

    @property
    def requests(self) -> list[ReceivedRequest]:
        with self._lock:
            return list(self._requests)

    def requests_for(self, key: str) -> list[ReceivedRequest]:
        return [r for r in self.requests if r.key == key]

    def _record(self, request: ReceivedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _next_response(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        key = first_user_text(messages)
        with self._lock:
            by_position = self._by_position.get(key)
            turns = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
            if by_position is not None and turns < len(by_position):
                return by_position[turns]
            queue = self._scenarios.get(key)
            if queue:
                return queue.popleft()
        return {"text": last_user_text(messages)}

    def _sleep(self, seconds: float) -> bool:
        """Wait; False when the fake is stopping."""
        return not self._stopping.wait(seconds) if seconds > 0 else True


class _Handler(BaseHTTPRequestHandler):
    owner: FakeAnthropic
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        pass

    # -- request ---------------------------------------------------------------------------

    def do_POST(self) -> None:  # noqa: N802 (stdlib naming)
        try:
            self._handle()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (e.g. timeout)
            self.close_connection = True

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        headers = {k.lower(): v for k, v in self.headers.items()}
        auth, credential = None, None
        if headers.get("x-api-key"):
            auth, credential = "x-api-key", headers["x-api-key"]
        elif headers.get("authorization", "").lower().startswith("bearer "):
            auth, credential = "bearer", headers["authorization"][7:]
        self.owner._record(ReceivedRequest(self.path, headers, body, auth))

        if self.path.split("?")[0] != "/v1/messages":
            return self._error(404, "not_found_error", f"no route for {self.path}")
        if credential is None or (self.owner.api_key and credential != self.owner.api_key):
            return self._error(401, "authentication_error", "invalid x-api-key")
        for field in ("model", "max_tokens", "messages"):
            if field not in body:
                return self._error(400, "invalid_request_error", f"{field}: Field required")
        if body.get("stream") is not True:
            return self._error(400, "invalid_request_error", "this fake only streams")
        if problem := conversation_problem(body["messages"]):
            return self._error(400, "invalid_request_error", problem)

        response = self.owner._next_response(body)
        if not self.owner._sleep(float(response.get("delay_s", 0))):
            return
        extra = {str(k): str(v) for k, v in (response.get("headers") or {}).items()}
        if "status" in response and int(response["status"]) != 200:
            status = int(response["status"])
            error = response.get("error") or {}
            kind = error.get("type") or ERROR_TYPES.get(status, "api_error")
            return self._error(status, kind, error.get("message") or kind, extra)
        self._stream(body, response, extra)

    # -- responses -------------------------------------------------------------------------

    def _error(
        self, status: int, kind: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", f"req_{uuid.uuid4().hex[:12]}")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _stream(
        self, body: dict[str, Any], response: dict[str, Any], headers: dict[str, str]
    ) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", f"req_{uuid.uuid4().hex[:12]}")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        delay = float(response.get("chunk_delay_s", 0))
        for i, (event, data) in enumerate(self._events(body, response)):
            if i and not self.owner._sleep(delay):
                return
            if event == "end":
                break
            if event == "drop":
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            self._chunk(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
            if event == "error":
                break
        self._chunk(b"")  # the terminating zero-length chunk

    def _events(
        self, body: dict[str, Any], response: dict[str, Any]
    ) -> list[tuple[str, dict[str, Any]]]:
        usage = response.get("usage") or {}
        text = str(response.get("text") or "")
        calls = list(response.get("tool_calls") or [])
        start_usage = {
            "input_tokens": int(usage.get("input", 10)),
            "output_tokens": 1,
            "cache_read_input_tokens": int(usage.get("cache_read", 0)),
            "cache_creation_input_tokens": int(usage.get("cache_write", 0)),
        }
        message = {
            "id": f"msg_{uuid.uuid4().hex[:16]}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or self.owner.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": start_usage,
        }
        out: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": message}),
            ("ping", {"type": "ping"}),
        ]
        interrupt = any(
            response.get(k) for k in ("error_mid_stream", "drop_mid_stream", "truncate_mid_stream")
        )
        index = 0
        if text or not calls:
            out.append(_block_start(index, {"type": "text", "text": ""}))
            for piece in pieces(text):
                out.append(_block_delta(index, {"type": "text_delta", "text": piece}))
            if interrupt:  # after the text, inside its block
                return [*out, _interruption(response)]
            out.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
            index += 1
        for call in calls:
            call_id = call.get("id") or f"toolu_{uuid.uuid4().hex[:20]}"
            block = {"type": "tool_use", "id": call_id, "name": call["name"], "input": {}}
            out.append(_block_start(index, block))
            raw = call.get("raw_arguments")
            partial = raw if raw is not None else json.dumps(call.get("arguments") or {})
            for fragment in pieces(partial, 4):
                delta = {"type": "input_json_delta", "partial_json": fragment}
                out.append(_block_delta(index, delta))
            out.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
            index += 1
            if interrupt:  # tool calls only: after the first one
                return [*out, _interruption(response)]
        stop = response.get("stop_reason") or ("tool_use" if calls else "end_turn")
        output_tokens = int(usage.get("output", len(pieces(text)) + 8 * len(calls)))
        out.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": output_tokens},
                },
            )
        )
        out.append(("message_stop", {"type": "message_stop"}))
        return out


def _block_start(index: int, block: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    data = {"type": "content_block_start", "index": index, "content_block": block}
    return "content_block_start", data


def _block_delta(index: int, delta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}


def _interruption(response: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The connection drop, clean end or `error` event that cuts a stream short."""
    if response.get("drop_mid_stream"):
        return "drop", {}
    if response.get("truncate_mid_stream"):
        return "end", {}
    error = response.get("error") or {}
    kind = error.get("type") or "overloaded_error"
    message = error.get("message") or ("Overloaded" if kind == "overloaded_error" else kind)
    return "error", {"type": "error", "error": {"type": kind, "message": message}}
