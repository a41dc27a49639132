"""Server-Sent Events: one turn, or every turn of a session in order."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Header, Query, Request
from sse_starlette import EventSourceResponse

from ...errors import InvalidRequest, NotFound
from ...observability.metrics import sse_connection
from ...observability.tracing import link_to
from ...runtime import Runtime
from ...store.repo import TERMINAL
from ...streaming import parse_entry_id
from ..deps import RuntimeDep, StreamCallerDep
from ..session_stream import session_events
from ..sse import turn_sse
from ..stream_guard import StreamSlots, credential_check, rechecked
from ..turn_lookup import TurnLookups

router = APIRouter(tags=["events"])
SSE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/event-stream": {}}, "description": "an SSE stream"}
}
LastEventId = Annotated[str | None, Header(alias="Last-Event-ID", max_length=100)]
TokenQuery = Annotated[
    str | None,
    Query(description="A session token, for clients that cannot send headers (`EventSource`)."),
]


def _valid_turn_cursor(value: str | None) -> str | None:
    if value is None or value == "":
        return None
    if parse_entry_id(value) is None:
        raise InvalidRequest(
            "Last-Event-ID must be an event id this stream sent, like 1001-3",
            code="invalid_last_event_id",
        )
    return value


Chunk = TypeVar("Chunk")


async def counted(
    stream: Literal["turn", "session"], events: AsyncIterator[Chunk]
) -> AsyncIterator[Chunk]:
    """`events`, counted in `cortex_sse_connections{stream}` while the response is open."""
    with sse_connection(stream):
        async for event in events:
            yield event


async def guarded(
    rt: Runtime,
    request: Request,
    tenant_id: uuid.UUID,
    events: AsyncIterator[Any],
    *,
    slotted: bool,
) -> AsyncIterator[Any]:
    """`events` with its credential checked again every `stream_recheck_s`; a session
    stream (open until the client leaves) also holds one of the tenant's stream slots
    (docs/security.md). Raises `QuotaExceeded` before the first byte."""
    every = rt.settings.stream_recheck_s
    slots = StreamSlots(request.app.state.redis, tenant_id, every) if slotted else None
    if slots is not None:
        await slots.take(rt.settings.tenant_max_streams)

    async def run() -> AsyncIterator[Any]:
        try:
            check = credential_check(rt, request)
            hold = slots.hold if slots is not None else None
            async for event in rechecked(events, check, every_s=every, hold=hold):
                yield event
        finally:
            if slots is not None:
                await slots.release()

    return run()


@router.get("/v1/turns/{turn_id}/events", responses=SSE_RESPONSES)
async def turn_stream(
    turn_id: uuid.UUID,
    request: Request,
    rt: RuntimeDep,
    caller: StreamCallerDep,
    last_event_id: LastEventId = None,
    after: Annotated[
        str | None, Query(max_length=100, description="Same as Last-Event-ID.")
    ] = None,
    token: TokenQuery = None,
) -> EventSourceResponse:
    """The turn's events (`token`, `tool_call`, `tool_result`, `step_restart`, `message`,
    `error`, `done`); resumes after `Last-Event-ID`."""
    cursor = _valid_turn_cursor(last_event_id or after)
    lookups: TurnLookups = request.app.state.turn_lookups
    state = await lookups.get(turn_id)
    if state is None or state.tenant_id != caller.tenant_id or not caller.sees(state.session_id):
        raise NotFound(f"turn {turn_id} not found")
    link_to(state.traceparent)  # the request's span follows the turn's trace, not a child in it
    running = state.status not in TERMINAL
    events = turn_sse(rt, request.app.state.redis, turn_id, last_id=cursor, running=running)
    events = await guarded(rt, request, caller.tenant_id, events, slotted=False)
    return EventSourceResponse(counted("turn", events), ping=int(rt.settings.sse_ping_s))


@router.get("/v1/sessions/{session_id}/events", responses=SSE_RESPONSES)
async def session_stream(
    session_id: uuid.UUID,
    request: Request,
    rt: RuntimeDep,
    caller: StreamCallerDep,
    last_event_id: LastEventId = None,
    after: Annotated[
        str | None, Query(max_length=100, description="Same as Last-Event-ID.")
    ] = None,
    token: TokenQuery = None,
) -> EventSourceResponse:
    """Events of every turn of the session, in order, from its active turn on, and the
    session's notices (`proposal` decisions); after `Last-Event-ID` when given. Event ids are
    `{turn_seq}:{turn event id}~{notice id}`; each event's data carries `turn` (null for a
    notice)."""
    caller.require_read(session_id, f"session {session_id}")
    events = await session_events(
        rt,
        request.app.state.redis,
        session_id,
        tenant_id=caller.tenant_id,
        last_id=last_event_id or after,
    )
    events = await guarded(rt, request, caller.tenant_id, events, slotted=True)
    return EventSourceResponse(counted("session", events), ping=int(rt.settings.sse_ping_s))
