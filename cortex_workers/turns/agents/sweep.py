"""The reconciler's part for agent tasks: end tasks past their deadline (timed out), cancel
foreground tasks whose calling turn ended, end the tasks of sub-agent turns that ended, and
send again python and A2A tasks that were lost or
whose runner stopped renewing its lease (killed)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...runtime import Runtime
from ...store import agent_tasks
from ...store.db import transaction
from ...vocabulary import TaskStatus
from ..steps import AgentTaskRef, NextStep
from .cancel import ORPHANED, stop_task
from .results import child_turn_ended, complete


@dataclass
class AgentSweep:
    resent: list[AgentTaskRef] = field(default_factory=list)
    ended: list[NextStep] = field(default_factory=list)
    timed_out: int = 0


def sweep_agent_tasks(rt: Runtime) -> AgentSweep:
    out = AgentSweep()
    if not rt.agents.cards:
        return out
    with transaction(rt.db) as db:
        overdue = list(agent_tasks.overdue(db))
    for task_id in overdue:
        message = "the agent did not answer in time"
        publish = complete(
            rt, task_id, status=TaskStatus.FAILED, error={"code": "timeout", "message": message}
        )
        out.timed_out += 1
        out.ended += publish
    with transaction(rt.db) as db:
        orphans = list(agent_tasks.orphaned(db))
    for task_id in orphans:
        out.ended += stop_task(rt, task_id, error=ORPHANED)
    with transaction(rt.db) as db:
        children = list(agent_tasks.children_ended(db))
    for _, turn_id in children:
        out.ended += child_turn_ended(rt, turn_id)
    with transaction(rt.db) as db:
        lost = agent_tasks.lost(db, republish_after_s=rt.settings.republish_after_s)
        out.resent = [AgentTaskRef(task_id) for task_id in lost]
    return out
