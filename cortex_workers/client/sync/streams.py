# Generated from cortex_workers/client/aio/streams.py by scripts/unasync_client.py: do not
# edit. Change the async source, then run `.venv/bin/python scripts/unasync_client.py`.
"""`TurnStream`: a turn's typed events over SSE, resumed with `Last-Event-ID` whenever the
connection drops."""

from __future__ import annotations

import time
from collections.abc import Iterator

from httpx_sse import connect_sse

from .. import calls
from ..events import Event, parse_event
from ..models import Answer, Turn
from ..sse import DROPPED, Cursor
from ..streams import FollowedTurn
from ..transport import delay_for, raise_for
from .transport import SyncTransport


class TurnStream(FollowedTurn):
    """The turn's typed events, in order, each once, until `done`: `for event in stream`.
    A dropped connection is resumed where it stopped; iterating again after an interruption goes
    on from the last event received."""

    def __init__(
        self, transport: SyncTransport, turn_id: str, *, last_event_id: str | None = None
    ) -> None:
        super().__init__(turn_id, last_event_id)
        self._transport = transport

    def __iter__(self) -> Iterator[Event]:
        path = calls.turn_events_path(self.turn_id)
        for event in follow(self._transport, path, self.cursor):
            self._keep(event)
            yield event

    def wait(self) -> Answer:
        """Read to the end; the answer (raises `TurnFailed` / `TurnCancelled`)."""
        for _ in self:
            pass
        turn = Turn.model_validate(self._transport.send(calls.get_turn(self.turn_id)))
        return self.answer(turn)


def follow(transport: SyncTransport, path: str, cursor: Cursor) -> Iterator[Event]:
    """The events after `cursor`, until `done`, across dropped connections."""
    http, max_retries = transport.http, transport.max_retries
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
