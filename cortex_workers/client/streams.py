"""A turn followed to its end: the events, the answer's text as they give it, and the outcome.

What both clients' streams keep (`aio.streams.AsyncTurnStream`, and `sync.streams.TurnStream`
generated from it).
"""

from __future__ import annotations

from ..vocabulary import TurnStatus
from .errors import TurnCancelled, TurnFailed
from .events import DoneEvent, ErrorEvent, Event, TextAccumulator
from .models import Answer, Turn
from .sse import Cursor


class FollowedTurn:
    """What a stream keeps while it is read: its position, the text so far, the outcome."""

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
            error = turn.error
            code = self.error.code if self.error else (error["code"] if error else "failed")
            message = self.error.message if self.error else str(error["message"] if error else None)
            raise TurnFailed(self.turn_id, code, message)
        if turn.status is TurnStatus.CANCELLED:
            raise TurnCancelled(self.turn_id)
        usage = self.done.usage if self.done else turn.usage
        cost = self.done.cost_usd if self.done else turn.cost_usd
        return Answer(text=self.text, turn=turn, usage=usage, cost=cost)
