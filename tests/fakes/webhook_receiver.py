"""A webhook receiver on a loopback port that verifies every request with the
`standardwebhooks` package, as a customer's endpoint would."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


@dataclass
class Received:
    """One request: its `webhook-id`, whether its signature verified, and the payload."""

    msg_id: str
    verified: bool
    payload: dict[str, Any] | None
    answered: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Receiver:
    """Answers `answer(request_no)` (a status code) to each request, after `hold(request_no)`
    (a function that may block, to hold a request open)."""

    answer: Callable[[int], int] = lambda _: 200
    hold: Callable[[int], None] = lambda _: None
    secret: str = ""
    received: list[Received] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    _server: http.server.ThreadingHTTPServer | None = None

    def start(self) -> str:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (stdlib name)
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                n = len(receiver.received)
                receiver.hold(n)
                status = receiver.answer(n)
                receiver.received.append(receiver.verify(body, dict(self.headers), status))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}/hooks"

    def verify(self, body: bytes, headers: dict[str, str], status: int) -> Received:
        msg_id = headers.get("webhook-id", "") or headers.get("Webhook-Id", "")
        try:
            payload = Webhook(self.secret).verify(body, headers)
        except WebhookVerificationError:
            return Received(msg_id, False, json.loads(body or b"null"), status, body, headers)
        return Received(msg_id, True, payload, status, body, headers)

    def delivered(self) -> dict[str, dict[str, Any]]:
        """Verified payloads answered 2xx, deduplicated by `webhook-id`."""
        return {
            r.msg_id: r.payload
            for r in self.received
            if r.verified and 200 <= r.answered < 300 and r.payload is not None
        }

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
