"""Server-Sent Events: one turn, or every turn of a session in order."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.concurrency import run_in_threadpool
from sse_starlette import EventSourceResponse, ServerSentEvent

from ...errors import InvalidRequest
from ...runtime import Runtime
from ...store import repo
from ...store.db import transaction
from ...store.models import Turn
from ...streaming import parse_entry_id
from ..deps import RuntimeDep, TenantDep
from ..sse import turn_events
from ..views import require_session, require_turn

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
    await run_in_threadpool(_owned_turn, rt, turn_id, tenant_id)
    client = request.app.state.redis

    async def events() -> AsyncIterator[ServerSentEvent]:
        async for e in turn_events(rt, client, turn_id, last_id=cursor):
            yield ServerSentEvent(data=e.data, event=e.event, id=e.id)

    return EventSourceResponse(events(), ping=int(rt.settings.sse_ping_s))


def _owned_turn(rt: Runtime, turn_id: uuid.UUID, tenant_id: uuid.UUID) -> None:
    with transaction(rt.db) as db:
        require_turn(db, turn_id, tenant_id)


def _session_cursor(value: str | None) -> tuple[int, str | None] | None:
    """`"{turn_seq}:{entry_id}"` → (turn_seq, entry_id)."""
    if not value:
        return None
    seq, sep, entry = value.partition(":")
    if not sep or not seq.isdigit() or parse_entry_id(entry) is None:
        raise InvalidRequest(
            "Last-Event-ID must be an event id this stream sent, like 3:1001-0",
            code="invalid_last_event_id",
        )
    return int(seq), entry


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
    """Events of every turn of the session, in order, from its active turn on (or after
    `Last-Event-ID`, whose form is `{turn_seq}:{event id}`). Each event's data carries `turn`."""
    cursor = _session_cursor(last_event_id or after)
    start = await run_in_threadpool(_start_seq, rt, session_id, tenant_id)
    seq, entry_cursor = cursor if cursor else (start, None)
    client = request.app.state.redis

    async def events() -> AsyncIterator[ServerSentEvent]:
        nonlocal seq, entry_cursor
        while True:
            turn = await run_in_threadpool(_turn_at, rt, session_id, seq)
            if turn is None:
                await asyncio.sleep(0.5)
                continue
            async for e in turn_events(rt, client, turn.id, last_id=entry_cursor):
                data = {**json.loads(e.data), "turn": str(turn.id)}
                yield ServerSentEvent(
                    data=json.dumps(data, ensure_ascii=False), event=e.event, id=f"{seq}:{e.id}"
                )
            seq, entry_cursor = seq + 1, None

    return EventSourceResponse(events(), ping=int(rt.settings.sse_ping_s))
