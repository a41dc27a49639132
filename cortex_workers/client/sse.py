"""Where a turn's event stream is: what both clients' streams keep across connections.

A stream reads the turn's events over SSE and resumes with `Last-Event-ID` whenever the
connection drops (`aio.streams`, and `sync.streams` generated from it). The position is kept in a
`Cursor` that outlives one iteration: a caller interrupted mid-stream (Ctrl-C, a cancelled task)
iterates again from where it stopped, and receives each event once.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from httpx_sse import SSEError

from .errors import ConnectionFailed
from .events import DoneEvent, Event
from .transport import backoff_s

DROPPED = (httpx.TransportError, SSEError)
"""What ends a connection before `done`: the stream opens another."""


@dataclass(slots=True)
class Cursor:
    """Where a stream is: the last SSE id received, and whether `done` came."""

    last_event_id: str | None = None
    done: bool = False
    failures: int = 0
    """Connections in a row that ended before any new event."""

    def headers(self) -> dict[str, str]:
        return {"Last-Event-ID": self.last_event_id} if self.last_event_id else {}

    def seen(self, event: Event) -> None:
        self.failures = 0
        if event.id:
            self.last_event_id = event.id
        if isinstance(event, DoneEvent):
            self.done = True

    def dropped(self, path: str, max_retries: int, why: object) -> float:
        """A connection ended early: the wait before the next one, or raise after too many."""
        self.failures += 1
        if self.failures > max_retries:
            raise ConnectionFailed(f"GET {path}: the stream kept dropping ({why})")
        return backoff_s(self.failures - 1)
