"""A tool step whose call answered with a task: the step stays leased, held by no worker, past
the task's deadline; the call's task is recorded in the same statement; the first poll is
sent after the interval the server asked for."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ...messages import JsonObject, ToolProgress
from ...runtime import Runtime
from ...store import parked_calls
from ...store.db import transaction
from ...store.step_commit import StepKey, close_step
from ...store.step_record_rows import RecordRows
from ...streaming import emit_batch_event
from ...tools.remote_tasks import RemoteTask
from ...vocabulary import StepKind
from ..observe import StepOutcome, count_step
from ..steps import Publish, TaskPollRef

HOLD_SLACK_S = 120.0
"""The step stays leased this long past its task's deadline: the poll that ends an overdue
task has that long to come (the reconciler sends lost polls again within seconds)."""


@dataclass(frozen=True, slots=True)
class WaitingCall:
    """The claimed tool step whose call answered with a task."""

    key: StepKey
    step_no: int
    model_step_no: int
    tool_call_id: uuid.UUID
    call_id: str
    name: str
    arguments: JsonObject


def park_call(rt: Runtime, call: WaitingCall, task: RemoteTask, rows: RecordRows) -> list[Publish]:
    """Park the step on `task` (with what the step learned so far); the first poll to send."""
    new = parked_calls.NewParked(
        tool_call_id=call.tool_call_id,
        turn_id=call.key.turn_id,
        session_id=call.key.session_id,
        tenant_id=call.key.tenant_id,
        step_id=call.key.step_id,
        step_attempt=call.key.attempt,
        step_no=call.step_no,
        model_step_no=call.model_step_no,
        call_id=call.call_id,
        name=call.name,
        arguments=call.arguments,
        server=task.server,
        task_id=task.task_id,
        poll_s=task.poll_s,
        wait_s=task.wait_s,
        hold_s=task.wait_s + HOLD_SLACK_S,
    )
    with transaction(rt.db) as db:
        parked_id = parked_calls.park(db, new)
        if parked_id is not None and any(rows.parts):
            close_step(db, call.key, None, rows)
    if parked_id is None:
        count_step(StepKind.TOOL, StepOutcome.DUPLICATE)
        return []
    count_step(StepKind.TOOL, StepOutcome.PARKED)
    message = f"{task.server} runs this call as a task; its result comes when the task ends"
    event = ToolProgress(id=call.call_id, name=call.name, elapsed_s=0.0, message=message)
    emit_batch_event(rt.redis, call.key.turn_id, model_step_no=call.model_step_no, event=event)
    return [TaskPollRef(parked_id, countdown=task.poll_s)]
