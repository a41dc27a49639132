"""Turn events for SSE: live from the Redis Stream, or as a snapshot from Postgres once the
stream has expired. Ids follow the stream's scheme so `Last-Event-ID` works on both."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import redis.asyncio as aioredis
from fastapi.concurrency import run_in_threadpool

from ..runtime import Runtime
from ..store import repo
from ..store import steps as step_store
from ..store.db import transaction
from ..store.repo import TERMINAL
from ..streaming import (
    TERMINAL_MS,
    Entry,
    decode_entry,
    emit_terminal,
    parse_entry_id,
    stream_key,
    tool_batch_ms,
)
from ..turns.lifecycle import Ended

CHECK_DB_EVERY_S = 3.0


def _entry(ms: int, seq: int, event: str, data: dict[str, Any]) -> Entry:
    return Entry(f"{ms}-{seq}", event, json.dumps(data, ensure_ascii=False, default=str))


def snapshot(rt: Runtime, turn_id: uuid.UUID) -> list[Entry] | None:
    """A finished turn's events rebuilt from Postgres; None while the turn is not finished."""
    with transaction(rt.db) as db:
        turn = repo.get_turn(db, turn_id)
        if turn is None or turn.status not in TERMINAL:
            return None
        steps = {s.id: s for s in step_store.steps_of_turn(db, turn_id)}
        messages = repo.turn_messages(db, turn_id)
        results = {c.call_id: c for c in repo.tool_calls_of_turn(db, turn_id)}
        ended = Ended.of(turn)
    out: list[Entry] = []
    for m in messages:
        step = steps.get(m.step_id) if m.step_id else None
        if m.role != "assistant" or step is None:
            continue
        ms = step.step_no * 1000 + max(step.attempt, 1)
        out.append(_entry(ms, 0, "token", {"text": m.content, "step": step.step_no}))
        out.append(
            _entry(
                ms, 1, "message", {"role": "assistant", "content": m.content, "step": step.step_no}
            )
        )
        for i, call in enumerate(m.tool_calls or ()):
            out.append(_entry(ms, 2 + i, "tool_call", {**call, "step": step.step_no}))
            row = results.get(call["id"])
            if row is not None and row.status == "done":
                out.append(
                    _entry(
                        tool_batch_ms(step.step_no),
                        0,
                        "tool_result",
                        {
                            "id": row.call_id,
                            "name": row.name,
                            "is_error": row.is_error,
                            "content": row.result or "",
                            "truncated": row.truncated,
                        },
                    )
                )
    out.sort(key=lambda e: parse_entry_id(e.id) or (0, 0))
    _renumber_tool_results(out)
    if ended.error:
        out.append(_entry(TERMINAL_MS, 0, "error", ended.error))
    out.append(_entry(TERMINAL_MS, 1, "done", ended.done_event()))
    return out


def _renumber_tool_results(entries: list[Entry]) -> None:
    counters: dict[str, int] = {}
    for i, e in enumerate(entries):
        if e.event == "tool_result":
            ms = e.id.split("-")[0]
            n = counters.get(ms, 0)
            counters[ms] = n + 1
            entries[i] = Entry(f"{ms}-{n}", e.event, e.data)


def _after(entry_id: str, last_id: str | None) -> bool:
    if not last_id:
        return True
    mine, theirs = parse_entry_id(entry_id), parse_entry_id(last_id)
    return theirs is None or (mine is not None and mine > theirs)


def _ensure_terminal(rt: Runtime, turn_id: uuid.UUID) -> bool:
    """If Postgres says the turn ended, make sure its stream says so too."""
    with transaction(rt.db) as db:
        turn = repo.get_turn(db, turn_id)
        if turn is None or turn.status not in TERMINAL:
            return False
        ended = Ended.of(turn)
    emit_terminal(
        rt.redis,
        turn_id,
        done=ended.done_event(),
        error=ended.error,
        ttl_s=rt.settings.stream_ttl_s,
    )
    return True


async def turn_events(
    rt: Runtime, client: aioredis.Redis, turn_id: uuid.UUID, *, last_id: str | None
) -> AsyncIterator[Entry]:
    """Entries after `last_id` until `done`."""
    key = stream_key(turn_id)
    if not await client.exists(key):
        entries = await run_in_threadpool(snapshot, rt, turn_id)
        if entries is not None:
            for e in entries:
                if _after(e.id, last_id):
                    yield e
            return
    cursor = last_id if last_id and parse_entry_id(last_id) else "0-0"
    waited = 0.0
    while True:
        reply: list[Any] = await client.xread(  # type: ignore[assignment]
            {key: cursor}, block=1000, count=500
        )
        if not reply:
            waited += 1.0
            if waited >= CHECK_DB_EVERY_S:
                waited = 0.0
                await run_in_threadpool(_ensure_terminal, rt, turn_id)
            continue
        waited = 0.0
        for entry_id, fields in reply[0][1]:
            entry = decode_entry(entry_id, fields)
            cursor = entry.id
            yield entry
            if entry.is_done:
                return
