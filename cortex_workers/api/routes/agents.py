"""Agents: their cards, a session's agent tasks, cancelling a task."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from ...agents.cards import AgentCard, LlmCard, Skill
from ...dispatch import publish
from ...messages import ErrorDoc, JsonObject, TaskProgress
from ...store import agent_tasks
from ...store.db import transaction
from ...store.models import AgentTask
from ...turns.agents.cancel import cancel_task
from ...vocabulary import AgentKind, AgentMode, TaskStatus
from ..deps import RuntimeDep, TenantDep
from ..views import require_session, shown_source

router = APIRouter(tags=["agents"])


class Capabilities(BaseModel):
    """A2A's AgentCapabilities, as they apply to a call through this server."""

    streaming: bool
    push_notifications: bool


class AgentOut(BaseModel):
    """An agent's card: A2A AgentCard fields where they apply, and how it is called here."""

    name: str
    description: str
    skills: list[Skill]
    capabilities: Capabilities
    input_schema: JsonObject
    default_input_modes: list[str]
    default_output_modes: list[str]
    kind: AgentKind
    mode: AgentMode
    timeout_s: float
    tool: str
    """The tool a session's model calls. (A remote agent's endpoint is the operator's to know:
    never shown.)"""


class RejectedAgentOut(BaseModel):
    source: str
    name: str | None
    reason: str


class AgentsOut(BaseModel):
    agents: list[AgentOut]
    rejected: list[RejectedAgentOut]


class TaskOut(BaseModel):
    id: uuid.UUID
    agent: str
    status: TaskStatus
    mode: AgentMode
    input: JsonObject | None
    result: Any
    error: ErrorDoc | None
    progress: TaskProgress | None
    created_at: datetime
    finished_at: datetime | None
    follow_up_turn_id: uuid.UUID | None
    turn_id: uuid.UUID
    """The turn whose model called the agent."""
    child_session_id: uuid.UUID | None
    """A sub-agent's own session (kind llm)."""


def agent_out(card: AgentCard) -> AgentOut:
    return AgentOut(
        name=card.name,
        description=card.description,
        skills=card.skills,
        capabilities=Capabilities(streaming=isinstance(card, LlmCard), push_notifications=False),
        input_schema=card.input_schema,
        default_input_modes=["application/json"],
        default_output_modes=["text/plain", "application/json"],
        kind=card.kind,
        mode=card.mode,
        timeout_s=card.timeout_s,
        tool=f"{card.name}_agent",
    )


def task_out(task: AgentTask) -> TaskOut:
    return TaskOut(
        id=task.id,
        agent=task.agent,
        status=TaskStatus(task.status),
        mode=AgentMode(task.mode),
        input=task.input,
        result=task.result,
        error=task.error,
        progress=task.progress,
        created_at=task.created_at,
        finished_at=task.finished_at,
        follow_up_turn_id=task.follow_up_turn_id,
        turn_id=task.turn_id,
        child_session_id=task.child_session_id,
    )


@router.get("/v1/agents", response_model=AgentsOut)
def list_agents(rt: RuntimeDep, tenant_id: TenantDep) -> AgentsOut:
    """The configured agents' cards, and the cards that were rejected, with the reason."""
    registry = rt.agents
    return AgentsOut(
        agents=[agent_out(registry.cards[n]) for n in registry.names()],
        rejected=[
            RejectedAgentOut(source=shown_source(r.source), name=r.name, reason=r.reason)
            for r in registry.rejected
        ],
    )


@router.get("/v1/sessions/{session_id}/tasks", response_model=list[TaskOut])
def list_tasks(session_id: uuid.UUID, rt: RuntimeDep, tenant_id: TenantDep) -> list[TaskOut]:
    """The session's agent tasks, oldest first."""
    with transaction(rt.db) as db:
        require_session(db, session_id, tenant_id)
        return [task_out(t) for t in agent_tasks.of_session(db, session_id)]


@router.post(
    "/v1/tasks/{task_id}/cancel",
    response_model=TaskOut,
    responses={409: {"description": "the task has already ended"}},
)
def cancel(task_id: uuid.UUID, rt: RuntimeDep, tenant_id: TenantDep) -> TaskOut:
    """Cancel a submitted or working task; its end is answered like any other (a follow-up
    turn for a background call). Cancelling it again answers the same task."""
    publish(cancel_task(rt, tenant_id=tenant_id, task_id=task_id))
    with transaction(rt.db) as db:
        task = agent_tasks.get(db, task_id, tenant_id=tenant_id)
        assert task is not None
        return task_out(task)
