"""A turn followed to its end: the events, the answer's text as they give it, and the outcome."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

from ..vocabulary import TurnStatus
from .errors import TurnCancelled, TurnFailed
from .events import DoneEvent, ErrorEvent, Event, TextAccumulator
from .models import Answer, Turn
from .sse import Cursor, aiter_events, iter_events

if TYPE_CHECKING:
    from .aio import AsyncClient
    from .sync import Client


class _Followed:
    """What both kinds of stream keep while they are read."""

    def __init__(self, turn_id: str, last_event_id: str | None) -> None:
        self.turn_id = turn_id
        self.cursor = Cursor(last_event_id=last_event_id)
        self._text = TextAccumulator()
        self.done: DoneEvent | None = None
        """The `done` event, once it came."""
        self.error: ErrorEvent | None = None
        """The `error` event, if the turn failed."""

    def _keep(self, event: Event) -> None:
        self._text.add(event)
        if isinstance(event, DoneEvent):
            self.done = event
        elif isinstance(event, ErrorEvent):
            self.error = event

    @property
    def text(self) -> str:
        """The answer's text so far: equal to the stored answer once `done` came."""
        return self._text.text

    @property
    def last_event_id(self) -> str | None:
        return self.cursor.last_event_id

    def answer(self, turn: Turn) -> Answer:
        """The answer of a turn that ended; raises if it failed or was cancelled (or a recovery
        rolled it back with an error)."""
        rolled_back = turn.status is TurnStatus.ROLLED_BACK and turn.error is not None
        if turn.status is TurnStatus.FAILED or rolled_back:
            code = self.error.code if self.error else str((turn.error or {}).get("code", "failed"))
            message = self.error.message if self.error else str((turn.error or {}).get("message"))
            raise TurnFailed(self.turn_id, code, message)
        if turn.status is TurnStatus.CANCELLED:
            raise TurnCancelled(self.turn_id)
        usage = self.done.usage if self.done else turn.usage
        cost = self.done.cost_usd if self.done else turn.cost_usd
        return Answer(text=self.text, turn=turn, usage=usage, cost=cost)


class TurnStream(_Followed):
    """Iterate it for the turn's typed events, in order, each once, until `done`; a dropped
    connection is resumed where it stopped. Iterating again after an interruption goes on from
    the last event received."""

    def __init__(self, client: Client, turn_id: str, *, last_event_id: str | None = None) -> None:
        super().__init__(turn_id, last_event_id)
        self._client = client

    def __iter__(self) -> Iterator[Event]:
        path = f"/v1/turns/{self.turn_id}/events"
        http, retries = self._client.http, self._client.max_retries
        for event in iter_events(http, path, self.cursor, max_retries=retries):
            self._keep(event)
            yield event

    def wait(self) -> Answer:
        """Read to the end; the answer (raises `TurnFailed` / `TurnCancelled`)."""
        for _ in self:
            pass
        return self.answer(self._client.turns.get(self.turn_id))


class AsyncTurnStream(_Followed):
    """`TurnStream` for the async client: `async for event in stream`."""

    def __init__(
        self, client: AsyncClient, turn_id: str, *, last_event_id: str | None = None
    ) -> None:
        super().__init__(turn_id, last_event_id)
        self._client = client

    async def __aiter__(self) -> AsyncIterator[Event]:
        path = f"/v1/turns/{self.turn_id}/events"
        http, retries = self._client.http, self._client.max_retries
        async for event in aiter_events(http, path, self.cursor, max_retries=retries):
            self._keep(event)
            yield event

    async def wait(self) -> Answer:
        async for _ in self:
            pass
        return self.answer(await self._client.turns.get(self.turn_id))
