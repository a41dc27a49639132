"""What agents add to a model step's context: the session's agents as `<name>_agent` tools,
the ended task a follow-up turn answers, and a sub-agent's addition from its parent."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from ...messages import Message, ToolSpec
from ...runtime import Runtime
from ...store import agent_tasks
from ...store.step_views import ModelStepView
from ...vocabulary import TaskStatus
from ..context import as_data
from ..step_plan import StepPlan


@dataclass(frozen=True, slots=True)
class AgentAdditions:
    tools: list[ToolSpec]
    system: str | None
    """A system message after the system prompt and summary: a sub-agent's view of its
    parent (the parent's whiteboard)."""
    note: Message | None
    """The last message of a follow-up turn's context: the task's end, for the model to tell
    the user."""


def agent_additions(rt: Runtime, view: ModelStepView, plan: StepPlan) -> AgentAdditions:
    """From what the step's claim read: nothing where no agent is configured."""
    if not rt.agents.cards:
        return AgentAdditions([], None, None)
    tools = rt.agents.specs(view.agents) if view.agents else []
    note = None
    if view.trigger is not None and view.trigger.get("kind") == "task" and view.task is not None:
        t = view.task
        task = agent_tasks.EndedTask(
            uuid.UUID(t["id"]), t["agent"], TaskStatus(t["status"]), t["result"], t["error"]
        )
        note = Message(role="user", content=task_note(task))
    return AgentAdditions(tools, plan.parent_whiteboard, note)


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
