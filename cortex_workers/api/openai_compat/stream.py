"""A response's stream: our turn's events, translated (see `events`), as SSE with `event:` and
`data:` lines; and waiting for a response to end."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable

import redis.asyncio as aioredis
from fastapi.concurrency import run_in_threadpool
from openai.types.responses import ResponseStreamEvent
from sse_starlette import ServerSentEvent

from ...runtime import Runtime
from ...store.db import transaction
from ...store.repo import TERMINAL
from ..sse import turn_events
from .errors import OpenAIBadRequest
from .events import Translator
from .views import Loaded, load, response_of

Reload = Callable[[], Loaded]


def reloader(rt: Runtime, response_id: str, tenant_id: uuid.UUID) -> Reload:
    def reload() -> Loaded:
        with transaction(rt.db) as db:
            return load(db, response_id, tenant_id, deleted_too=True)

    return reload


async def translated(
    rt: Runtime, client: aioredis.Redis, loaded: Loaded, reload: Reload
) -> AsyncIterator[ResponseStreamEvent]:
    """Every event of the response from its beginning, until its terminal event."""
    turn = loaded.turn
    first = response_of(
        loaded, status="queued" if loaded.request.get("background") else "in_progress", empty=True
    )
    translator = Translator(
        turn.id, first, bool(loaded.request.get("background")), loaded.client_tools
    )
    for event in translator.opening():
        yield event
    running = turn.status not in TERMINAL
    async for entry in turn_events(rt, client, turn.id, last_id=None, running=running):
        if entry.is_done:
            final = response_of(await run_in_threadpool(reload))
            for event in translator.closing(final):
                yield event
            return
        for event in translator.feed(entry):
            yield event


def _sse(event: ResponseStreamEvent) -> ServerSentEvent:
    return ServerSentEvent(data=event.model_dump_json(), event=event.type)


async def _after(
    events: AsyncIterator[ResponseStreamEvent], starting_after: int
) -> AsyncIterator[ServerSentEvent]:
    async for event in events:
        if event.sequence_number > starting_after:
            yield _sse(event)


async def _listed(events: list[ResponseStreamEvent]) -> AsyncIterator[ServerSentEvent]:
    for event in events:
        yield _sse(event)


async def response_sse(
    rt: Runtime,
    client: aioredis.Redis,
    loaded: Loaded,
    reload: Reload,
    *,
    starting_after: int = -1,
) -> AsyncIterator[ServerSentEvent]:
    """The SSE body after event `starting_after`. A response that has ended is translated
    before the first byte, so that a `starting_after` past its last event is a 400."""
    events = translated(rt, client, loaded, reload)
    if loaded.turn.status not in TERMINAL:
        return _after(events, starting_after)
    every = [e async for e in events]
    if starting_after >= len(every):
        raise OpenAIBadRequest(
            f"starting_after {starting_after} is past the last event of this response "
            f"({len(every) - 1})",
            param="starting_after",
        )
    return _listed(every[starting_after + 1 :])


async def wait_for_end(rt: Runtime, client: aioredis.Redis, loaded: Loaded) -> None:
    """Return once the response's turn has ended (its stream's `done`)."""
    if loaded.turn.status in TERMINAL:
        return
    async for entry in turn_events(rt, client, loaded.turn.id, last_id=None, running=True):
        if entry.is_done:
            return
