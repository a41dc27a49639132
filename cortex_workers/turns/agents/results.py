"""How an agent task ends, once: a foreground call's answer becomes the calling tool step's
result (the last of its batch starts the next model step, as tool results do); a background
call's end queues a follow-up turn on the parent session. Both in the transaction that ends
the task, under the parent session's lock."""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy.orm import Session as Db

from ...messages import AgentDone, ErrorDoc, JsonObject, TaskChanged, ToolResultReady
from ...runtime import Runtime
from ...store import agent_tasks, repo
from ...store.db import Executor, transaction
from ...store.models import AgentTask
from ...store.step_commit import StepKey, ToolDone, close_step
from ...store.step_record_rows import RecordRows
from ...streaming import emit_batch_event, emit_session_notice
from ...vocabulary import AgentMode, StepKind, TaskStatus, ToolSeverity, TurnStatus
from ..steps import NextStep, step_ref
from . import hooks as agent_hooks
from .follow_up import queue_follow_up


def task_event(task: AgentTask) -> TaskChanged:
    return TaskChanged(
        id=str(task.id),
        agent=task.agent,
        status=TaskStatus(task.status),
        progress=task.progress,
        error=task.error,
        follow_up_turn_id=str(task.follow_up_turn_id) if task.follow_up_turn_id else None,
    )


def announce_task(rt: Runtime, task: AgentTask) -> None:
    """The task's state on its session's stream."""
    emit_session_notice(
        rt.redis, task.session_id, event=task_event(task), ttl_s=rt.settings.stream_ttl_s
    )


def result_text(task: AgentTask) -> tuple[str, bool]:
    """What the parent model reads of an ended task, and whether it is an error."""
    if task.status == TaskStatus.COMPLETED:
        result = task.result
        return (result if isinstance(result, str) else json.dumps(result)), False
    message = task.error["message"] if task.error else ""
    return json.dumps({"status": task.status, "error": message}), True


def agent_result(
    *,
    tool_call_id: uuid.UUID,
    call_id: str,
    name: str,
    content: str,
    is_error: bool,
    arguments: JsonObject,
) -> ToolDone:
    """An agent call's answer as its tool step's result (the value every tool result is)."""
    return ToolDone(
        tool_call_id=tool_call_id,
        call_id=call_id,
        name=name,
        content=content,
        is_error=is_error,
        truncated=False,
        severity=ToolSeverity.ERROR if is_error else ToolSeverity.OK,
        error_kind="agent" if is_error else None,
        latency_ms=0,
        audit_input={"arguments": arguments},
        audit_output={"chars": len(content), "agent": True},
    )


def store_call_result(db: Executor, step: StepKey, done: ToolDone) -> list[NextStep] | None:
    """Store an agent call's tool result (fenced by the tool step's attempt) and, when it
    completes the batch, the turn's next model step, with the one statement a tool step ends
    with; None when it was not ours to store."""
    closed = close_step(db, step, done, RecordRows())
    if not closed.went:
        return None
    return step_ref(
        closed.next_step_id, StepKind.MODEL, turn_id=step.turn_id, session_id=step.session_id
    )


def answer_parent(db: Db, task: AgentTask) -> list[NextStep]:
    """A foreground task's answer as its call's tool result."""
    content, is_error = result_text(task)
    step = StepKey(task.session_id, task.turn_id, task.step_id, task.step_attempt, task.tenant_id)
    done = agent_result(
        tool_call_id=task.tool_call_id,
        call_id=task.call_id,
        name=f"{task.agent}_agent",
        content=content,
        is_error=is_error,
        arguments=task.input or {},
    )
    return store_call_result(db, step, done) or []


def complete(
    rt: Runtime,
    task_id: uuid.UUID,
    *,
    status: TaskStatus,
    attempt: int | None = None,
    result: Any = None,
    error: ErrorDoc | None = None,
) -> list[NextStep]:
    """End the task once (see the module's doc); what to publish. A duplicate end does
    nothing."""
    publish: list[NextStep] = []
    with transaction(rt.db) as db:
        found = agent_tasks.get(db, task_id)
        if found is None:
            return []
        repo.get_session(db, found.session_id, lock=True)  # the lock comes first
        task = agent_tasks.finish(
            db, task_id, status=status, attempt=attempt, result=result, error=error
        )
        if task is None:
            return []
        if task.child_session_id is not None and isinstance(task.result, str):
            answer = agent_hooks.child_answered(db, task.session_id, task.result, agent=task.agent)
            if answer != task.result:
                task.result = answer
                db.flush()
        if task.mode == AgentMode.FOREGROUND:
            publish += answer_parent(db, task)
        else:
            turn_id, started = queue_follow_up(rt, db, task)
            agent_tasks.set_follow_up(db, task, turn_id)
            publish += started
    _announce_end(rt, task)
    return publish


def _announce_end(rt: Runtime, task: AgentTask) -> None:
    announce_task(rt, task)
    if task.mode != AgentMode.FOREGROUND:
        return
    content, is_error = result_text(task)
    name = f"{task.agent}_agent"
    for event in (
        AgentDone(
            id=task.call_id,
            name=name,
            agent=task.agent,
            task_id=str(task.id),
            status=TaskStatus(task.status),
        ),
        ToolResultReady(
            id=task.call_id,
            name=name,
            is_error=is_error,
            content=content,
            truncated=False,
            severity=ToolSeverity.ERROR if is_error else ToolSeverity.OK,
            error="agent" if is_error else None,
        ),
    ):
        emit_batch_event(rt.redis, task.turn_id, model_step_no=task.model_step_no, event=event)


def child_turn_ended(rt: Runtime, turn_id: uuid.UUID) -> list[NextStep]:
    """The end of a sub-agent's turn ends its task (idempotent; the reconciler calls it too
    for a child turn whose end was not followed up)."""
    if not rt.agents.cards:
        return []
    with transaction(rt.db) as db:
        task = agent_tasks.of_child_turn(db, turn_id)
        turn = repo.get_turn(db, turn_id) if task is not None else None
        if task is None or turn is None or not turn.status.is_terminal:
            return []
        task_id, status, answer, error = task.id, turn.status, turn.answer, turn.error
    match status:
        case TurnStatus.DONE:
            return complete(rt, task_id, status=TaskStatus.COMPLETED, result=answer or "")
        case TurnStatus.CANCELLED:
            return complete(rt, task_id, status=TaskStatus.CANCELED, error=error)
        case _:
            return complete(rt, task_id, status=TaskStatus.FAILED, error=error)
