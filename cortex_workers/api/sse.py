"""Turn events for SSE: live from the Redis Stream, or as a snapshot from Postgres once the
stream has expired. Ids follow the stream's scheme so `Last-Event-ID` works on both."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import redis.asyncio as aioredis
from fastapi.concurrency import run_in_threadpool
from redis.exceptions import RedisError
from sse_starlette import ServerSentEvent

from ..messages import (
    AssistantMessage,
    StepRestart,
    Token,
    ToolCallRequested,
    TurnEvent,
    encode,
)
from ..runtime import Runtime
from ..store import proposals, repo, tool_calls
from ..store import steps as step_store
from ..store.db import transaction
from ..store.repo import TERMINAL
from ..streaming import (
    OPEN_ID,
    TERMINAL_MS,
    Entry,
    follows,
    parse_entry_id,
    read_entries,
    stream_key,
    terminal_entries,
    tool_batch_ms,
)
from ..turns.events import proposal_changed, tool_result_of
from ..turns.lifecycle import Ended
from ..vocabulary import ToolCallStatus

log = logging.getLogger(__name__)

CHECK_DB_EVERY_S = 3.0
LOST_STREAM_POLL_S = 0.5


@dataclass
class _Group:
    """The events of one step (or one tool batch) under one stream-id millisecond part."""

    ms: int
    events: list[TurnEvent] = field(default_factory=list)
    step: tuple[int, int] | None = None
    """(step_no, attempt) of a model step: resuming inside it restarts its text."""


def _groups(rt: Runtime, turn_id: uuid.UUID) -> tuple[list[_Group], Ended] | None:
    with transaction(rt.db) as db:
        turn = repo.get_turn(db, turn_id)
        if turn is None or turn.status not in TERMINAL:
            return None
        steps = {s.id: s for s in step_store.steps_of_turn(db, turn_id)}
        messages = repo.turn_messages(db, turn_id)
        results = {c.call_id: c for c in tool_calls.of_turn(db, turn_id)}
        by_call = {
            p.tool_call_id: p
            for p in proposals.of_session(db, turn.session_id)
            if p.turn_id == turn_id
        }
        ended = Ended.of(db, turn)
    groups: list[_Group] = []
    for m in messages:
        step = steps.get(m.step_id) if m.step_id else None
        if m.role != "assistant" or step is None:
            continue
        no, attempt = step.step_no, max(step.attempt, 1)
        group = _Group(no * 1000 + attempt, step=(no, attempt))
        group.events.append(Token(text=m.content, step=no))
        group.events.append(AssistantMessage(content=m.content, step=no))
        batch = _Group(tool_batch_ms(no))
        for call in m.tool_calls or ():
            group.events.append(
                ToolCallRequested(
                    id=call["id"], name=call["name"], arguments=call["arguments"], step=no
                )
            )
            row = results.get(call["id"])
            if row is not None and row.status == ToolCallStatus.DONE:
                proposal = by_call.get(row.id)
                if proposal is not None:
                    batch.events.append(proposal_changed(proposal))
                batch.events.append(tool_result_of(row))
        groups += [g for g in (group, batch) if g.events]
    return groups, ended


def snapshot(rt: Runtime, turn_id: uuid.UUID, *, last_id: str | None) -> list[Entry] | None:
    """A finished turn's events after `last_id`, rebuilt from Postgres; None while it runs.

    Ids keep the live stream's millisecond parts, so a client resuming with an id it got live
    lands in the right place: inside a model step (any attempt of it) it first gets
    `step_restart` (drop that step's partial text) and the whole text again; inside a tool
    batch it gets the batch's results again (a `tool_result` is identified by its `id`).
    """
    built = _groups(rt, turn_id)
    if built is None:
        return None
    groups, ended = built
    last_ms, last_seq = parse_entry_id(last_id or "") or (-1, -1)
    out: list[Entry] = []
    for g in groups:
        if g.ms < last_ms:
            continue
        events, first = g.events, 0
        if g.ms == last_ms:
            first = last_seq + 1
        if g.step is not None and _inside(g.step, last_ms):
            events = [StepRestart(step=g.step[0], attempt=g.step[1]), *events]
        out += [_entry(g.ms, first + i, event) for i, event in enumerate(events)]
    for seq, event in terminal_entries(
        done=ended.done_event(), error=ended.error_event(), discard=ended.discard_event()
    ):
        if (TERMINAL_MS, seq) > (last_ms, last_seq):
            out.append(_entry(TERMINAL_MS, seq, event))
    return out


def _inside(step: tuple[int, int], last_ms: int) -> bool:
    """Whether a client that last saw `last_ms` holds partial text of model step `step`: of
    the stored attempt itself, or of an earlier attempt of the same step (cut off, retried)."""
    no, attempt = step
    return no * 1000 < last_ms <= no * 1000 + attempt


def _entry(ms: int, seq: int, event: TurnEvent) -> Entry:
    name, data = encode(event)
    return Entry(f"{ms}-{seq}", name, data)


def _ensure_terminal(rt: Runtime, turn_id: uuid.UUID) -> bool:
    """If Postgres says the turn ended, make sure its stream says so too."""
    with transaction(rt.db) as db:
        turn = repo.get_turn(db, turn_id)
        if turn is None or turn.status not in TERMINAL:
            return False
        ended = Ended.of(db, turn)
    ended.write_terminal_events(rt)
    return True


async def turn_sse(
    rt: Runtime,
    client: aioredis.Redis,
    turn_id: uuid.UUID,
    *,
    last_id: str | None,
    running: bool,
) -> AsyncIterator[bytes]:
    """The turn's SSE body: the entries of one read in one write, until `done`. A Redis
    failure ends it early; the client resumes with Last-Event-ID."""
    try:
        batches = turn_event_batches(rt, client, turn_id, last_id=last_id, running=running)
        async for batch in batches:
            yield b"".join(
                ServerSentEvent(data=e.data, event=e.event, id=e.id).encode() for e in batch
            )
    except RedisError as exc:
        log.warning("turn %s: event stream ended early: %s", turn_id, exc)


async def turn_events(
    rt: Runtime,
    client: aioredis.Redis,
    turn_id: uuid.UUID,
    *,
    last_id: str | None,
    running: bool = False,
) -> AsyncIterator[Entry]:
    """Entries after `last_id` until `done`, one by one (see `turn_event_batches`)."""
    async for batch in turn_event_batches(rt, client, turn_id, last_id=last_id, running=running):
        for entry in batch:
            yield entry


async def turn_event_batches(
    rt: Runtime,
    client: aioredis.Redis,
    turn_id: uuid.UUID,
    *,
    last_id: str | None,
    running: bool = False,
) -> AsyncIterator[list[Entry]]:
    """Entries after `last_id` until `done`, as they arrive: the entries of one read together,
    so that a burst of tokens reaches the client in one write.

    Entries come live from the stream while it is whole. One that does not directly follow
    the previous one (a new step, a tool batch, the end) is only sent after checking that the
    stream still has its start marker; if it lost it (Redis restarted without its data while
    the turn ran), the rest is sent from Postgres once the turn has ended, with the same ids.
    `running` says the caller has just seen the turn active: then a missing stream means it
    has not streamed yet, and Postgres is not asked for a snapshot that cannot exist.
    """
    key = stream_key(turn_id)
    if not running and not await client.exists(key):
        entries = await run_in_threadpool(lambda: snapshot(rt, turn_id, last_id=last_id))
        if entries is not None:
            if entries:
                yield entries
            return
    cursor = last_id if last_id and parse_entry_id(last_id) else "0-0"
    position = parse_entry_id(cursor) or (0, 0)
    waited = 0.0
    while True:
        entries = read_entries(await client.xread({key: cursor}, block=1000, count=500))
        if not entries:
            waited += 1.0
            if waited >= CHECK_DB_EVERY_S:
                waited = 0.0
                await run_in_threadpool(_ensure_terminal, rt, turn_id)
            continue
        waited = 0.0
        whole = False  # this read saw the start marker: everything it returned is whole
        batch: list[Entry] = []
        for entry in entries:
            at = parse_entry_id(entry.id) or (0, 0)
            if entry.id == OPEN_ID:
                cursor, position, whole = entry.id, at, True
                continue
            if not whole and not follows(position, at) and not await _whole(client, key):
                if batch:
                    yield batch
                async for rebuilt in _after_loss(rt, turn_id, cursor):
                    yield rebuilt
                return
            cursor, position = entry.id, at
            batch.append(entry)
            if entry.is_done:
                yield batch
                return
        if batch:
            yield batch


async def _whole(client: aioredis.Redis, key: str) -> bool:
    return bool(await client.xrange(key, min=OPEN_ID, max=OPEN_ID))


async def _after_loss(rt: Runtime, turn_id: uuid.UUID, cursor: str) -> AsyncIterator[list[Entry]]:
    """The events after `cursor` of a turn whose stream lost its beginning: rebuilt from
    Postgres when the turn has ended (a step resumed inside starts with `step_restart`)."""
    while True:
        entries = await run_in_threadpool(lambda: snapshot(rt, turn_id, last_id=cursor))
        if entries is not None:
            if entries:
                yield entries
            return
        await asyncio.sleep(LOST_STREAM_POLL_S)
