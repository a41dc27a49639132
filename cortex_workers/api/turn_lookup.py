"""Who owns a turn, whether it has ended and which trace it is, read once for every SSE
request that asks at the same moment: when thousands of clients open one turn's events
together, one query answers them all instead of each waiting for a database thread of its own."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

from fastapi.concurrency import run_in_threadpool

from ..runtime import Runtime
from ..store import repo
from ..store.db import autocommit
from ..vocabulary import TurnStatus


@dataclass(frozen=True, slots=True)
class TurnState:
    tenant_id: uuid.UUID
    status: TurnStatus
    traceparent: str | None
    """The trace context stored with the turn: its SSE requests link to it."""
    session_id: uuid.UUID


class TurnLookups:
    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self._pending: dict[uuid.UUID, asyncio.Future[TurnState | None]] = {}

    async def get(self, turn_id: uuid.UUID) -> TurnState | None:
        """The turn's owner, status and trace, from the query in flight for it or a new one."""
        pending = self._pending.get(turn_id)
        if pending is None:
            pending = asyncio.ensure_future(run_in_threadpool(self._read, turn_id))
            self._pending[turn_id] = pending
            pending.add_done_callback(lambda _: self._pending.pop(turn_id, None))
        return await asyncio.shield(pending)

    def _read(self, turn_id: uuid.UUID) -> TurnState | None:
        with autocommit(self._rt.db) as db:
            row = repo.turn_owner_status_and_trace(db, turn_id)
        return TurnState(*row) if row else None
