"""A session's SSE stream: every turn's events in order, from its active turn on, merged with
the session's notices (proposal decisions). Each event's data carries `turn` (null for a
notice); its id is the cursor `{turn_seq}:{turn event id}~{notice id}` to resume from."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import assert_never

import redis.asyncio as aioredis
from fastapi.concurrency import run_in_threadpool
from sse_starlette import ServerSentEvent

from ..errors import InvalidRequest
from ..keys import notices_key
from ..observability.tracing import link_to
from ..runtime import Runtime
from ..store import repo
from ..store.db import transaction
from ..store.models import Turn
from ..streaming import Entry, parse_entry_id, read_entries
from .sse import turn_events
from .views import require_session

log = logging.getLogger(__name__)

QUEUE_SIZE = 256
NEXT_TURN_POLL_S = 0.5


@dataclass
class SessionCursor:
    """Where a session stream is: the turn and its last event, and the last notice.

    Sent as each event's id: `{turn_seq}:{turn event id}~{notice id}` (the notice part is
    optional when resuming)."""

    seq: int
    entry: str | None
    notice: str | None

    def __str__(self) -> str:
        return f"{self.seq}:{self.entry or '0-0'}~{self.notice or '0-0'}"

    @classmethod
    def parse(cls, value: str | None) -> SessionCursor | None:
        """The cursor a client resumes from; None to start now."""
        if not value:
            return None
        turn_part, _, notice = value.partition("~")
        seq, sep, entry = turn_part.partition(":")
        if (
            not sep
            or not seq.isdigit()
            or parse_entry_id(entry) is None
            or (notice and parse_entry_id(notice) is None)
        ):
            raise InvalidRequest(
                "Last-Event-ID must be an event id this stream sent, like 3:1001-0~0-0",
                code="invalid_last_event_id",
            )
        return cls(int(seq), entry, notice or None)


@dataclass(frozen=True, slots=True)
class _TurnEntry:
    seq: int
    turn_id: uuid.UUID
    entry: Entry


@dataclass(frozen=True, slots=True)
class _Notice:
    entry: Entry


@dataclass(frozen=True, slots=True)
class _ReaderFailed:
    error: Exception


_Item = _TurnEntry | _Notice | _ReaderFailed


async def session_events(
    rt: Runtime,
    client: aioredis.Redis,
    session_id: uuid.UUID,
    *,
    tenant_id: uuid.UUID,
    last_id: str | None,
) -> AsyncIterator[ServerSentEvent]:
    """The session's events after `last_id` (from now on without one). The cursor and the
    session's ownership are checked here, before the stream starts."""
    given = SessionCursor.parse(last_id)
    start = await run_in_threadpool(_start_seq, rt, session_id, tenant_id)
    key = notices_key(session_id)
    if given is None:  # from now on: notices already sent are not replayed
        latest = await client.xrevrange(key, count=1)
        notice = latest[0][0] if latest else None
        given = SessionCursor(start, None, notice.decode() if isinstance(notice, bytes) else notice)
    return _SessionStream(rt, client, session_id, given).events()


def _start_seq(rt: Runtime, session_id: uuid.UUID, tenant_id: uuid.UUID) -> int:
    with transaction(rt.db) as db:
        session = require_session(db, session_id, tenant_id)
        active = repo.active_turns(db, session_id)
        return active[0].seq if active else session.last_turn_seq + 1


def _turn_at(rt: Runtime, session_id: uuid.UUID, seq: int) -> Turn | None:
    with transaction(rt.db) as db:
        return repo.turn_at(db, session_id, seq)


@dataclass
class _SessionStream:
    """Two readers, the turns in order and the notices, feed one queue; `events` sends what
    they read, each under the cursor it moves to."""

    rt: Runtime
    client: aioredis.Redis
    session_id: uuid.UUID
    cursor: SessionCursor

    async def events(self) -> AsyncIterator[ServerSentEvent]:
        queue: asyncio.Queue[_Item] = asyncio.Queue(maxsize=QUEUE_SIZE)
        tasks = [
            asyncio.create_task(_feed(self._turns, queue)),
            asyncio.create_task(_feed(self._notices, queue)),
        ]
        try:
            while True:
                item = await queue.get()
                match item:
                    case _TurnEntry(seq=seq, turn_id=turn_id, entry=entry):
                        self.cursor.seq, self.cursor.entry = seq, entry.id
                        turn: str | None = str(turn_id)
                    case _Notice(entry=entry):
                        self.cursor.notice = entry.id
                        turn = None
                    case _ReaderFailed(error=error):
                        # Redis (or Postgres) failed under one of the readers: end the stream
                        # rather than leave the client waiting on a reader that is gone; it
                        # resumes with Last-Event-ID.
                        log.warning(
                            "session %s: event stream ended early: %s", self.session_id, error
                        )
                        return
                    case _:
                        assert_never(item)
                data = {**json.loads(entry.data), "turn": turn}
                yield ServerSentEvent(
                    data=json.dumps(data, ensure_ascii=False),
                    event=entry.event,
                    id=str(self.cursor),
                )
        finally:
            for task in tasks:
                task.cancel()

    async def _turns(self, queue: asyncio.Queue[_Item]) -> None:
        """Each turn's events until its `done`, then the next turn's, waiting for it to exist."""
        seq, entry = self.cursor.seq, self.cursor.entry
        while True:
            turn = await run_in_threadpool(_turn_at, self.rt, self.session_id, seq)
            if turn is None:
                await asyncio.sleep(NEXT_TURN_POLL_S)
                continue
            link_to(turn.traceparent)  # the request's span follows each turn's trace
            async for e in turn_events(self.rt, self.client, turn.id, last_id=entry):
                await queue.put(_TurnEntry(seq, turn.id, e))
            seq, entry = seq + 1, None

    async def _notices(self, queue: asyncio.Queue[_Item]) -> None:
        key = notices_key(self.session_id)
        last = self.cursor.notice or "0-0"
        while True:
            for entry in read_entries(await self.client.xread({key: last}, block=1000, count=100)):
                last = entry.id
                await queue.put(_Notice(entry))


async def _feed(
    produce: Callable[[asyncio.Queue[_Item]], Awaitable[None]], queue: asyncio.Queue[_Item]
) -> None:
    try:
        await produce(queue)
    except Exception as exc:  # a reader failed: the stream ends (see `events`)
        await queue.put(_ReaderFailed(exc))
