"""What agents add to a model step's context: the session's agents as `<name>_agent` tools,
the ended task a follow-up turn answers, and a sub-agent's addition from its parent."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from ..messages import Message, ToolSpec
from ..runtime import Runtime
from ..store import agent_tasks
from ..store.db import Executor
from ..vocabulary import TaskStatus
from . import agent_hooks
from .context import as_data


@dataclass(frozen=True, slots=True)
class AgentAdditions:
    tools: list[ToolSpec]
    system: str | None
    """A system message after the system prompt and summary: a sub-agent's view of its
    parent (the parent's whiteboard)."""
    note: Message | None
    """The last message of a follow-up turn's context: the task's end, for the model to tell
    the user."""


def agent_additions(rt: Runtime, db: Executor, turn_id: uuid.UUID) -> AgentAdditions:
    """Nothing, without a query, where no agent is configured."""
    if not rt.agents.cards:
        return AgentAdditions([], None, None)
    found = agent_tasks.turn_agents(db, turn_id)
    tools = rt.agents.specs(found.agents) if found.agents else []
    system = (
        agent_hooks.child_context(db, found.parent_session_id)
        if found.parent_session_id is not None
        else None
    )
    note = None
    trigger = found.trigger or {}
    if trigger.get("kind") == "task":
        task = agent_tasks.ended_task(db, uuid.UUID(trigger["task_id"]))
        if task is not None:
            note = Message(role="user", content=task_note(task))
    return AgentAdditions(tools, system, note)


def task_note(task: agent_tasks.EndedTask) -> str:
    """What the follow-up's model reads: which task ended, how, and its result as data."""
    status = task.status
    head = f"The background task {task.id} of the {task.agent} agent has {status.value}."
    if status == TaskStatus.COMPLETED:
        result = task.result if isinstance(task.result, str) else json.dumps(task.result)
        body = as_data(f"{task.agent}_agent", result)
    else:
        body = as_data(f"{task.agent}_agent", json.dumps(task.error or {}))
    return f"{head}\n{body}\nTell the user what came of it."
