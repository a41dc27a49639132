"""The reconciler's part for parked calls: the poll of a call whose look is long overdue (its
message was lost, or the worker that had it died) is sent again. A call past its deadline, or
that nobody waits for any more, is ended by that poll."""

from __future__ import annotations

from ...runtime import Runtime
from ...store import parked_calls
from ...store.db import transaction
from ..steps import TaskPollRef


def resend_lost_polls(rt: Runtime) -> list[TaskPollRef]:
    if not rt.settings.mcp.servers:
        return []
    with transaction(rt.db) as db:
        lost = parked_calls.lost(db, after_s=rt.settings.republish_after_s)
    return [TaskPollRef(parked_id) for parked_id in lost]
