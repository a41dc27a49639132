"""Server-Sent Events: one turn, or every turn of a session in order."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.concurrency import run_in_threadpool
from redis.exceptions import RedisError
from sse_starlette import EventSourceResponse, ServerSentEvent

from ...errors import InvalidRequest, NotFound
from ...keys import notices_key
from ...runtime import Runtime
from ...store import repo
from ...store.db import transaction
from ...store.models import Turn
from ...store.repo import TERMINAL
from ...streaming import decode_entry, parse_entry_id
from ..deps import RuntimeDep, TenantDep
from ..sse import turn_event_batches, turn_events
from ..turn_lookup import TurnLookups
from ..views import require_session

log = logging.getLogger(__name__)

router = APIRouter(tags=["events"])
SSE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/event-stream": {}}, "description": "an SSE stream"}
}
LastEventId = Annotated[str | None, Header(alias="Last-Event-ID", max_length=100)]


def _valid_turn_cursor(value: str | None) -> str | None:
    if value is None or value == "":
        return None
    if parse_entry_id(value) is None:
        raise InvalidRequest(
            "Last-Event-ID must be an event id this stream sent, like 1001-3",
            code="invalid_last_event_id",
        )
    return value


@router.get("/v1/turns/{turn_id}/events", responses=SSE_RESPONSES)
async def turn_stream(
    turn_id: uuid.UUID,
    request: Request,
    rt: RuntimeDep,
    tenant_id: TenantDep,
    last_event_id: LastEventId = None,
    after: Annotated[
        str | None, Query(max_length=100, description="Same as Last-Event-ID.")
    ] = None,
) -> EventSourceResponse:
    """The turn's events (`token`, `tool_call`, `tool_result`, `step_restart`, `message`,
    `error`, `done`); resumes after `Last-Event-ID`."""
    cursor = _valid_turn_cursor(last_event_id or after)
    lookups: TurnLookups = request.app.state.turn_lookups
    state = await lookups.get(turn_id)
    if state is None or state[0] != tenant_id:
        raise NotFound(f"turn {turn_id} not found")
    running = state[1] not in TERMINAL
    client = request.app.state.redis

    async def events() -> AsyncIterator[bytes]:
        try:
            batches = turn_event_batches(rt, client, turn_id, last_id=cursor, running=running)
            async for batch in batches:  # what one read returned goes out in one write
                yield b"".join(
                    ServerSentEvent(data=e.data, event=e.event, id=e.id).encode() for e in batch
                )
        except RedisError as exc:  # the stream ends; the client resumes with Last-Event-ID
            log.warning("turn %s: event stream ended early: %s", turn_id, exc)

    return EventSourceResponse(events(), ping=int(rt.settings.sse_ping_s))


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


def _session_cursor(value: str | None) -> SessionCursor | None:
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
    return SessionCursor(int(seq), entry, notice or None)


def _start_seq(rt: Runtime, session_id: uuid.UUID, tenant_id: uuid.UUID) -> int:
    with transaction(rt.db) as db:
        session = require_session(db, session_id, tenant_id)
        active = repo.active_turns(db, session_id)
        return active[0].seq if active else session.last_turn_seq + 1


def _turn_at(rt: Runtime, session_id: uuid.UUID, seq: int) -> Turn | None:
    from sqlalchemy import select

    with transaction(rt.db) as db:
        return db.execute(
            select(Turn).where(Turn.session_id == session_id, Turn.seq == seq)
        ).scalar_one_or_none()


@router.get("/v1/sessions/{session_id}/events", responses=SSE_RESPONSES)
async def session_stream(
    session_id: uuid.UUID,
    request: Request,
    rt: RuntimeDep,
    tenant_id: TenantDep,
    last_event_id: LastEventId = None,
    after: Annotated[
        str | None, Query(max_length=100, description="Same as Last-Event-ID.")
    ] = None,
) -> EventSourceResponse:
    """Events of every turn of the session, in order, from its active turn on, and the
    session's notices (`proposal` decisions); after `Last-Event-ID` when given. Event ids are
    `{turn_seq}:{turn event id}~{notice id}`; each event's data carries `turn` (null for a
    notice)."""
    given = _session_cursor(last_event_id or after)
    start = await run_in_threadpool(_start_seq, rt, session_id, tenant_id)
    client = request.app.state.redis
    key = notices_key(session_id)
    if given is None:  # from now on: notices already sent are not replayed
        latest = await client.xrevrange(key, count=1)
        given = SessionCursor(start, None, latest[0][0].decode() if latest else None)
    cursor = given

    async def turns(queue: asyncio.Queue[tuple[str, Any]]) -> None:
        seq, entry = cursor.seq, cursor.entry
        while True:
            turn = await run_in_threadpool(_turn_at, rt, session_id, seq)
            if turn is None:
                await asyncio.sleep(0.5)
                continue
            async for e in turn_events(rt, client, turn.id, last_id=entry):
                await queue.put(("turn", (seq, turn.id, e)))
            seq, entry = seq + 1, None

    async def notices(queue: asyncio.Queue[tuple[str, Any]]) -> None:
        last = cursor.notice or "0-0"
        while True:
            reply = await client.xread({key: last}, block=1000, count=100)
            for entry_id, fields in reply[0][1] if reply else []:
                entry = decode_entry(entry_id, fields)
                last = entry.id
                await queue.put(("notice", entry))

    async def feed(produce: Any, queue: asyncio.Queue[tuple[str, Any]]) -> None:
        try:
            await produce(queue)
        except Exception as exc:  # a reader failed: the stream ends (see below)
            await queue.put(("failed", exc))

    async def events() -> AsyncIterator[ServerSentEvent]:
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(maxsize=256)
        tasks = [
            asyncio.create_task(feed(turns, queue)),
            asyncio.create_task(feed(notices, queue)),
        ]
        try:
            while True:
                kind, item = await queue.get()
                if kind == "failed":
                    # Redis (or Postgres) failed under one of the readers: end the stream
                    # rather than leave the client waiting on a reader that is gone; it
                    # resumes with Last-Event-ID.
                    log.warning("session %s: event stream ended early: %s", session_id, item)
                    return
                if kind == "turn":
                    seq, turn_id, e = item
                    cursor.seq, cursor.entry = seq, e.id
                    data = {**json.loads(e.data), "turn": str(turn_id)}
                else:
                    e = item
                    cursor.notice = e.id
                    data = {**json.loads(e.data), "turn": None}
                yield ServerSentEvent(
                    data=json.dumps(data, ensure_ascii=False), event=e.event, id=str(cursor)
                )
        finally:
            for task in tasks:
                task.cancel()

    return EventSourceResponse(events(), ping=int(rt.settings.sse_ping_s))
