"""Follow-up turns: a background task's end, answered on its session like a user's turn.

A follow-up turn has no user message: its `trigger` (`{"kind": "task", "task_id"}`) names the
task, and its model step reads the task's result (`agent_context`). It is queued like any
other turn of the session: it starts at once when the session is idle, else after the turns
before it.
"""

from __future__ import annotations

import uuid

from sqlalchemy import update
from sqlalchemy.orm import Session as Db

from ...runtime import Runtime
from ...store import new_turns
from ...store.models import AgentTask, Turn
from ..lifecycle import promote_next
from ..steps import NextStep

TASK_TRIGGER = "task"


def queue_follow_up(rt: Runtime, db: Db, task: AgentTask) -> tuple[uuid.UUID, list[NextStep]]:
    """Store the follow-up turn of `task` and start it if the session is idle. Caller holds
    the session's lock."""
    turn = new_turns.insert_turn(
        db,
        tenant_id=task.tenant_id,
        session_id=task.session_id,
        start_timeout_s=None,
        content="",
    )
    db.execute(
        update(Turn)
        .where(Turn.id == turn.id)
        .values(trigger={"kind": TASK_TRIGGER, "task_id": str(task.id)})
    )
    return turn.id, promote_next(rt, db, task.session_id)
