"""A small threaded HTTP server for fake model APIs that stream server-sent events.

`SseServer` runs `http.server.ThreadingHTTPServer` on 127.0.0.1 (ephemeral port) in a daemon
thread. It records every request and keeps a thread-safe scenario registry: `enqueue(key,
*responses)` queues responses for requests whose first user message's text is `key`; with no
queued response a request gets the default (echo the last user message).
`answer_by_position(key, *responses)` answers by the number of assistant messages in the
request instead, so a request sent again gets the same answer. Subclasses speak one
wire protocol by implementing `respond` (routing, auth) plus `error_body` and `stream_frames`.

A response is a dict in a small DSL, every key optional::

    {"text": str, "tool_calls": [{"name", "arguments": dict | str}],
     "usage": {"input", "output", "cached"}, "status": int, "headers": {...},
     "error": {"message", "type", "code"}, "error_mid_stream": bool, "drop_mid_stream": bool,
     "delay_s": float, "chunk_delay_s": float, "finish_reason": str}

Streams use chunked transfer encoding and are flushed frame by frame; `DROP` in a stream closes
the connection without the terminating chunk, as a crashed server or proxy would.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections import defaultdict, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit


class _Drop:
    def __repr__(self) -> str:
        return "DROP"


DROP = _Drop()
"""Yield from `stream_frames` to close the connection mid-stream."""

Frame = bytes | _Drop


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    """Header names lower-cased."""
    body: Any
    """The parsed JSON body (None when empty or not JSON)."""
    key: str | None = None
    """The scenario key: the first user message's text."""


@dataclass
class Reply:
    """Writes the answer to one request on its connection."""

    handler: BaseHTTPRequestHandler
    sent: bool = field(default=False)

    def json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        h = self.handler
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        h.end_headers()
        h.wfile.write(data)
        h.wfile.flush()
        self.sent = True

    def stream(
        self,
        frames: Iterable[Frame],
        *,
        headers: dict[str, str] | None = None,
        chunk_delay_s: float = 0.0,
        wait: Any = None,
    ) -> None:
        """200 `text/event-stream`, one HTTP chunk per frame, flushed as it is written."""
        h = self.handler
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream; charset=utf-8")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Transfer-Encoding", "chunked")
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        h.end_headers()
        h.wfile.flush()
        self.sent = True
        for i, frame in enumerate(frames):
            if isinstance(frame, _Drop):
                self.drop()
                return
            if i and chunk_delay_s and wait is not None:
                wait(chunk_delay_s)
            h.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
            h.wfile.flush()
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()

    def drop(self) -> None:
        """Close the connection at once (no terminating chunk)."""
        h = self.handler
        h.close_connection = True
        with contextlib.suppress(OSError):
            h.wfile.flush()
        with contextlib.suppress(OSError):
            h.connection.shutdown(socket.SHUT_RDWR)


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event; `data` is JSON-encoded unless it is already a string."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {text}\n\n".encode()


def message_text(content: Any) -> str:
    """The text of a message's `content`: a string, or a list of parts with `text`."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return ""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HttpServer

    def _handle(self) -> None:
        self.server.owner._dispatch(self)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        pass


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, owner: SseServer) -> None:
        self.owner = owner
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that time out or go away are part of the tests


class SseServer:
    """Base of the fake model servers: lifecycle, request log, scenario registry."""

    name = "fake"

    def __init__(self) -> None:
        self._server: _HttpServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._scenarios: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
        self._by_position: dict[str, tuple[dict[str, Any], ...]] = {}
        self._requests: list[RecordedRequest] = []
        self.failures: list[BaseException] = []
        """Exceptions the fake itself raised while answering (a bug in the fake or a test)."""
        self.base_url = ""

    # lifecycle -------------------------------------------------------------------------------

    def start(self) -> str:
        """Listen on an ephemeral port; returns `http://127.0.0.1:PORT`."""
        self._stopping.clear()
        self._server = _HttpServer(self)
        port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"{self.name}-server",
            daemon=True,
        )
        self._thread.start()
        self.base_url = f"http://127.0.0.1:{port}"
        return self.base_url

    def stop(self) -> None:
        """Stop serving, end pending delays and close open connections."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        with server.connections_lock:
            open_connections = list(server.connections)
        for conn in open_connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> SseServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # scenarios and the request log ----------------------------------------------------------

    def enqueue(self, key: str, *responses: dict[str, Any]) -> None:
        """Queue responses for requests whose first user message's text is `key`."""
        with self._lock:
            self._scenarios[key].extend(responses)

    def answer_by_position(self, key: str, *responses: dict[str, Any]) -> None:
        """Answer requests whose first user message's text is `key` by where they are in the
        conversation: a request holding N assistant messages gets `responses[N]` (past the end,
        the default). Unlike `enqueue`, a request sent again (a step restarted after its lease
        lapsed) gets the same answer as the first time."""
        with self._lock:
            self._by_position[key] = responses

    def clear(self) -> None:
        """Forget queued responses and recorded requests."""
        with self._lock:
            self._scenarios.clear()
            self._by_position.clear()
            self._requests.clear()

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def requests_for(self, key: str) -> list[RecordedRequest]:
        """The recorded requests of one scenario key."""
        return [r for r in self.requests if r.key == key]

    def next_response(self, request: RecordedRequest) -> dict[str, Any]:
        """The next queued response for this request's key, else the default (echo)."""
        with self._lock:
            by_position = self._by_position.get(request.key or "")
            if by_position is not None:
                turns = sum(1 for m in self._messages(request.body) if m.get("role") == "assistant")
                if turns < len(by_position):
                    return by_position[turns]
            queue = self._scenarios.get(request.key or "")
            if queue:
                return queue.popleft()
        return {"text": self.last_user_text(request.body)}

    def wait(self, seconds: float) -> None:
        """Sleep, but end early when the server stops."""
        self._stopping.wait(seconds)

    # protocol hooks ----------------------------------------------------------------------------

    def first_user_text(self, body: Any) -> str | None:
        for m in self._messages(body):
            if m.get("role") == "user":
                return message_text(m.get("content"))
        return None

    def last_user_text(self, body: Any) -> str:
        for m in reversed(self._messages(body)):
            if m.get("role") == "user":
                return message_text(m.get("content"))
        return ""

    @staticmethod
    def _messages(body: Any) -> list[dict[str, Any]]:
        messages = body.get("messages") if isinstance(body, dict) else None
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    def respond(self, request: RecordedRequest, reply: Reply) -> None:
        """Route and answer one request; the default serves `next_response` (subclass hook)."""
        self.serve(request, reply, self.next_response(request))

    def error_body(self, status: int, error: dict[str, Any]) -> Any:
        """The JSON body of an error response in this protocol."""
        raise NotImplementedError

    def stream_frames(self, request: RecordedRequest, response: dict[str, Any]) -> Iterator[Frame]:
        """The SSE frames of a successful response (and `DROP` / in-stream errors)."""
        raise NotImplementedError

    def serve(self, request: RecordedRequest, reply: Reply, response: dict[str, Any]) -> None:
        """Answer with a DSL response: delay, then an error status or a stream."""
        if response.get("delay_s"):
            self.wait(float(response["delay_s"]))
        headers = {str(k): str(v) for k, v in (response.get("headers") or {}).items()}
        status = int(response.get("status") or 200)
        if status >= 400:
            reply.json(status, self.error_body(status, response.get("error") or {}), headers)
            return
        reply.stream(
            self.stream_frames(request, response),
            headers=headers,
            chunk_delay_s=float(response.get("chunk_delay_s") or 0.0),
            wait=self.wait,
        )

    # plumbing ------------------------------------------------------------------------------------

    def _dispatch(self, handler: _Handler) -> None:
        split = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        request = RecordedRequest(
            method=handler.command,
            path=split.path,
            query=dict(parse_qsl(split.query)),
            headers={k.lower(): v for k, v in handler.headers.items()},
            body=body,
            key=self.first_user_text(body),
        )
        with self._lock:
            self._requests.append(request)
        reply = Reply(handler)
        try:
            self.respond(request, reply)
        except OSError:  # the client went away (timed out, dropped)
            handler.close_connection = True
        except Exception as exc:
            self.failures.append(exc)
            handler.close_connection = True
            if not reply.sent:
                with contextlib.suppress(OSError):
                    reply.json(500, {"error": {"message": f"fake server bug: {exc!r}"}})
