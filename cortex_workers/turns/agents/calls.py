"""An agent call (`<name>_agent`), as its tool step starts it.

The step stores the call's task once (per tool call). A background call's tool result is
`{"task_id", "agent", "status": "working"}` at once; a foreground call leaves its tool step
leased until the task's deadline and the task's end stores the result (`turns.agents.results`), so
the batch joins in Postgres as tool calls do and no worker waits. An `llm` agent runs as a
child turn in a child session; `python` and `a2a` agents run on the `agents` queue.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import jsonschema
from sqlalchemy.orm import Session as Db

from ...agents.cards import AgentCard, LlmCard
from ...messages import AgentStarted, JsonObject, ToolResultReady
from ...runtime import Runtime
from ...store import agent_tasks, new_turns, repo
from ...store.db import transaction
from ...store.models import AgentTask
from ...store.step_commit import StepKey, ToolDone, write_record
from ...store.step_record_rows import RecordRows, TimelineRow
from ...streaming import emit_batch_event
from ...vocabulary import AgentMode, StepKind, TaskStatus, TimelineKind, ToolSeverity
from ..steps import AgentTaskRef, NextStep, Publish
from .results import agent_result, announce_task, result_text, store_call_result

ONE_CALL = "agent_call"
"""The metadata key of a session made to run one agent for an MCP client (`/mcp`): its call
runs in the foreground whatever the card's mode, since the client waits for (or polls) the
turn, whose answer is the agent's."""
HOLD_SLACK_S = 60.0
"""A foreground call's tool step stays leased this long past its task's deadline (the
reconciler ends the task at its deadline)."""


@dataclass(frozen=True, slots=True)
class AgentCall:
    """A claimed tool step whose tool is an agent."""

    step_id: uuid.UUID
    attempt: int
    turn_id: uuid.UUID
    tool_call_id: uuid.UUID
    call_id: str
    name: str
    arguments: JsonObject
    session_id: uuid.UUID
    tenant_id: uuid.UUID
    model_step_no: int

    @property
    def step(self) -> StepKey:
        return StepKey(self.session_id, self.turn_id, self.step_id, self.attempt, self.tenant_id)

    def result(self, content: str, *, is_error: bool = False) -> ToolDone:
        return agent_result(
            tool_call_id=self.tool_call_id,
            call_id=self.call_id,
            name=self.name,
            content=content,
            is_error=is_error,
            arguments=self.arguments,
        )


def start_call(rt: Runtime, call: AgentCall) -> list[Publish]:
    """Start (or, on a redelivery, resume) the call's task; what to publish."""
    card = rt.agents.by_tool(call.name)
    assert card is not None
    publish: list[Publish] = []
    with transaction(rt.db) as db:
        session = repo.get_session(db, call.session_id, lock=True)  # the lock comes first
        offered = session.agents if session is not None else None
        one_call = session is not None and (session.metadata_ or {}).get(ONE_CALL) == card.name
        problem = _not_offered(card, offered) or _input_problem(card, call.arguments)
        if problem is not None:
            stored = store_call_result(db, call.step, call.result(problem, is_error=True))
            _emit_result(rt, call, problem, is_error=True, stored=stored is not None)
            return list(stored or [])
        mode = AgentMode.FOREGROUND if one_call else card.mode
        task, created = agent_tasks.create(db, _new_task(call, card, mode))
        if created and isinstance(card, LlmCard):
            publish += _start_child(rt, db, task, card)
        elif created:
            publish.append(AgentTaskRef(task.id, call.session_id))
        answered = _answer_now(db, call, task)
        if answered is None:
            agent_tasks.hold_step(db, task, call.attempt, slack_s=HOLD_SLACK_S)
        else:
            publish += answered
        task_id, mode = task.id, AgentMode(task.mode)
        if created:  # the timeline's handoff, with the task
            write_record(db, turn_id=call.turn_id, rows=_handoff(call, card, task_id, mode))
    if created:
        _started(rt, call, card, task_id, mode)
        announce_task(rt, task)
    return publish


def _handoff(call: AgentCall, card: AgentCard, task_id: uuid.UUID, mode: AgentMode) -> RecordRows:
    data = {
        "agent": card.name,
        "kind": card.kind.value,
        "mode": mode.value,
        "task_id": str(task_id),
        "call_id": call.call_id,
    }
    row = TimelineRow(TimelineKind.HANDOFF, data, call.model_step_no, datetime.now(UTC))
    return RecordRows(events=(row,))


def _answer_now(db: Db, call: AgentCall, task: AgentTask) -> list[NextStep] | None:
    """The call's result now: a background call's task reference, or the result of a
    foreground task that ended before this (re)delivery; None to wait for the task."""
    if task.mode == AgentMode.BACKGROUND:
        content = json.dumps({"task_id": str(task.id), "agent": task.agent, "status": "working"})
        return store_call_result(db, call.step, call.result(content)) or []
    if TaskStatus(task.status).is_terminal:
        content, is_error = result_text(task)
        return store_call_result(db, call.step, call.result(content, is_error=is_error)) or []
    return None


def _started(
    rt: Runtime, call: AgentCall, card: AgentCard, task_id: uuid.UUID, mode: AgentMode
) -> None:
    started = AgentStarted(
        id=call.call_id, name=call.name, agent=card.name, task_id=str(task_id), mode=mode
    )
    emit_batch_event(rt.redis, call.turn_id, model_step_no=call.model_step_no, event=started)
    if mode == AgentMode.BACKGROUND:
        content = json.dumps({"task_id": str(task_id), "agent": card.name, "status": "working"})
        _emit_result(rt, call, content, is_error=False, stored=True)


def _emit_result(
    rt: Runtime, call: AgentCall, content: str, *, is_error: bool, stored: bool
) -> None:
    if not stored:
        return
    event = ToolResultReady(
        id=call.call_id,
        name=call.name,
        is_error=is_error,
        content=content,
        truncated=False,
        severity=ToolSeverity.ERROR if is_error else ToolSeverity.OK,
        error="invalid_arguments" if is_error else None,
    )
    emit_batch_event(rt.redis, call.turn_id, model_step_no=call.model_step_no, event=event)


def _not_offered(card: AgentCard, offered: list[str] | None) -> str | None:
    """An agent the session does not offer is never started, whatever the model (or a prompt
    injection in what it read) asks for."""
    if offered is not None and card.name in offered:
        return None
    return f"forbidden: the {card.name} agent is not offered in this session"


def _input_problem(card: AgentCard, arguments: JsonObject) -> str | None:
    try:
        jsonschema.validate(arguments, card.input_schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        at = f" at {where}" if where else ""
        return f"invalid arguments for {card.name}_agent{at}: {exc.message}"
    return None


def _new_task(call: AgentCall, card: AgentCard, mode: AgentMode) -> agent_tasks.NewTask:
    return agent_tasks.NewTask(
        tenant_id=call.tenant_id,
        session_id=call.session_id,
        turn_id=call.turn_id,
        tool_call_id=call.tool_call_id,
        call_id=call.call_id,
        step_id=call.step_id,
        step_attempt=call.attempt,
        model_step_no=call.model_step_no,
        agent=card.name,
        kind=card.kind.value,
        mode=mode.value,
        input=call.arguments,
        timeout_s=card.timeout_s,
    )


def _start_child(rt: Runtime, db: Db, task: AgentTask, card: LlmCard) -> list[NextStep]:
    """An `llm` agent's child session and its turn (started at once)."""
    parent = repo.get_session(db, task.session_id)
    assert parent is not None
    by = repo.get_turn(db, task.turn_id)
    child = repo.insert_session(  # the parent's mode, route and end user hold in the child
        db,
        task.tenant_id,
        name=f"{parent.name or 'session'}/{card.name}",
        system_prompt=card.system_prompt or None,
        provider=card.provider,
        model=card.model,
        tools=card.tools,
        metadata_={**card.metadata, "agent_task_id": str(task.id)},
        user=(by.user if by is not None else None) or parent.user,
        mode=parent.mode,
        route=(by.route if by is not None else None) or parent.route,
    )
    child.parent_session_id, child.agents = task.session_id, card.agents or None
    db.flush()
    input_ = task.input or {}
    content = input_["task"] if set(input_) == {"task"} else json.dumps(input_)
    turn = new_turns.insert_turn(
        db,
        tenant_id=task.tenant_id,
        session_id=child.id,
        start_timeout_s=card.timeout_s,
        content=str(content),
    )
    agent_tasks.link_child(db, task, session_id=child.id, turn_id=turn.id)
    assert turn.first_step_id is not None
    return [NextStep(turn.first_step_id, StepKind.MODEL, turn_id=turn.id, session_id=child.id)]
