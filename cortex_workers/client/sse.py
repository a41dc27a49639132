"""A turn's events over SSE, resumed with `Last-Event-ID` whenever the connection drops.

The position is kept in a `Cursor` that outlives one iteration: a caller interrupted mid-stream
(Ctrl-C, a cancelled task) iterates again from where it stopped, and receives each event once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import httpx
from httpx_sse import SSEError, aconnect_sse, connect_sse

from .errors import ConnectionFailed
from .events import DoneEvent, Event, parse_event
from .transport import backoff_s, delay_for, raise_for

DROPPED = (httpx.TransportError, SSEError)


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


def iter_events(
    http: httpx.Client, path: str, cursor: Cursor, *, max_retries: int
) -> Iterator[Event]:
    """The events after `cursor`, until `done`, across dropped connections."""
    while not cursor.done:
        why: object = "the stream ended before done"
        try:
            with connect_sse(http, "GET", path, headers=cursor.headers()) as source:
                response = source.response
                if response.status_code >= 400:
                    response.read()
                    delay = delay_for(response, cursor.failures, max_retries)
                    if delay is None:
                        raise_for(response)
                    cursor.failures += 1
                    time.sleep(delay or 0.0)
                    continue
                for sse in source.iter_sse():
                    event = parse_event(sse.event, sse.data, sse.id)
                    cursor.seen(event)
                    yield event
                    if cursor.done:
                        return
        except DROPPED as exc:
            why = exc
        time.sleep(cursor.dropped(path, max_retries, why))


async def aiter_events(
    http: httpx.AsyncClient, path: str, cursor: Cursor, *, max_retries: int
) -> AsyncIterator[Event]:
    """`iter_events` for the async client."""
    while not cursor.done:
        why: object = "the stream ended before done"
        try:
            async with aconnect_sse(http, "GET", path, headers=cursor.headers()) as source:
                response = source.response
                if response.status_code >= 400:
                    await response.aread()
                    delay = delay_for(response, cursor.failures, max_retries)
                    if delay is None:
                        raise_for(response)
                    cursor.failures += 1
                    await asyncio.sleep(delay or 0.0)
                    continue
                async for sse in source.aiter_sse():
                    event = parse_event(sse.event, sse.data, sse.id)
                    cursor.seen(event)
                    yield event
                    if cursor.done:
                        return
        except DROPPED as exc:
            why = exc
        await asyncio.sleep(cursor.dropped(path, max_retries, why))
