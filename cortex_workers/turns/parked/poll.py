"""One look at a parked call's task (a `tools` worker, after the interval its server asked
for): `tasks/get`, then either the next look, or the call's result stored with the statement
every tool step ends with (the last result of its batch starts the turn's next model step).

A task past its deadline, gone from its server, or whose server stops answering (or is no
longer configured) ends the call with an error result the model reads. A call nobody waits
for any more (its turn ended, or a later attempt of its step took over) has its task cancelled
with `tasks/cancel`, best effort.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime

from ...runtime import Runtime, get_runtime
from ...store import parked_calls
from ...store.db import transaction
from ...store.parked_calls import ParkedCall
from ...store.step_commit import StepKey, close_step
from ...streaming import emit_batch_event
from ...tools.remote_tasks import MIN_POLL_S, TaskPoll
from ...tools.router import ended_outcome
from ...vocabulary import StepKind, TimelineKind
from ..observe import StepOutcome, count_step
from ..step_record import StepRecord
from ..steps import Publish, TaskPollRef, step_ref
from ..tool_limits import limits
from ..tool_results import CallResult

log = logging.getLogger(__name__)
SILENT_POLLS = 5
"""Looks in a row that the task's server does not answer before the call ends with an error."""
MAX_BACKOFF_S = 60.0
"""The longest wait between two looks at a task whose server does not answer."""
BUSY_SLACK_S = 5.0


def poll_parked(parked_id: uuid.UUID) -> list[Publish]:
    """Look at the parked call's task once (see the module's doc); what to publish."""
    rt = get_runtime()
    with transaction(rt.db) as db:
        taken = parked_calls.take(db, parked_id, busy_s=_busy_s(rt))
    if taken is None:  # ended, or another delivery looks at it now
        return []
    call = taken.call
    if not taken.waited_for:
        _cancel(rt, call)
        with transaction(rt.db) as db:
            parked_calls.end(db, call.id)
        return []
    if taken.overdue:
        _cancel(rt, call)
        return _close(rt, call, TaskPoll(working=False, failure=_late(call)))
    try:
        found = _look(rt, call)
    except Exception as exc:  # no answer, or none that makes sense: look again later
        return _silent(rt, call, exc)
    if found.working:
        return _again(rt, call, after_s=found.poll_s, failures=0)
    return _close(rt, call, found)


def _look(rt: Runtime, call: ParkedCall) -> TaskPoll:
    sources = rt.mcp
    if sources is None:
        return TaskPoll(working=False, failure=f"the MCP server {call.server} is not configured")
    return sources.poll_task(call.server, call.task_id)


def _cancel(rt: Runtime, call: ParkedCall) -> None:
    if rt.mcp is not None:
        rt.mcp.cancel_task(call.server, call.task_id)


def _busy_s(rt: Runtime) -> float:
    """How long one look may take: the slowest configured server's timeout, and some."""
    timeouts = [s.timeout for s in rt.settings.mcp.servers.values()]
    return max(timeouts, default=30.0) + BUSY_SLACK_S


def _late(call: ParkedCall) -> str:
    waited = round((call.deadline - call.created_at).total_seconds())
    return f"the task did not end within {waited} s; it was cancelled"


def _silent(rt: Runtime, call: ParkedCall, exc: BaseException) -> list[Publish]:
    """The server did not answer (or not with a task): look again later, up to
    `SILENT_POLLS` times in a row."""
    failures = call.failures + 1
    if failures >= SILENT_POLLS:
        failure = f"the MCP server {call.server} did not answer about the task ({exc})"
        return _close(rt, call, TaskPoll(working=False, failure=failure))
    log.info("MCP server %s: tasks/get of %s failed: %s", call.server, call.task_id, exc)
    return _again(
        rt, call, after_s=min(call.poll_s * 2**failures, MAX_BACKOFF_S), failures=failures
    )


def _again(rt: Runtime, call: ParkedCall, *, after_s: float, failures: int) -> list[Publish]:
    left = (call.deadline - datetime.now(UTC)).total_seconds()
    after_s = max(MIN_POLL_S, min(after_s, left))
    with transaction(rt.db) as db:
        parked_calls.again(db, call.id, after_s=after_s, failures=failures)
    return [TaskPollRef(call.id, countdown=after_s)]


def _close(rt: Runtime, call: ParkedCall, ended: TaskPoll) -> list[Publish]:
    """Store the call's result (fenced by the attempt that parked it) and end the call."""
    waited_ms = round((datetime.now(UTC) - call.created_at).total_seconds() * 1000)
    outcome = ended_outcome(rt.tools, call.name, ended, limits=limits(rt), latency_ms=waited_ms)
    task = {"server": call.server, "id": call.task_id, "polls": call.polls}
    result = CallResult(
        call.tool_call_id, call.call_id, call.name, call.arguments, outcome, {"task": task}
    )
    record = StepRecord(call.step_no)
    record.note(TimelineKind.TOOL, result.timeline_event(), ending=True)
    key = StepKey(call.session_id, call.turn_id, call.step_id, call.step_attempt, call.tenant_id)
    with transaction(rt.db) as db:
        if not parked_calls.end(db, call.id):
            return []
        closed = close_step(db, key, result.done(), record.rows())
    if not closed.went:
        count_step(StepKind.TOOL, StepOutcome.DUPLICATE)
        return []
    count_step(StepKind.TOOL, StepOutcome.DONE)
    event = result.ready()
    emit_batch_event(rt.redis, call.turn_id, model_step_no=call.model_step_no, event=event)
    turn_id, session_id = call.turn_id, call.session_id
    return [*step_ref(closed.next_step_id, StepKind.MODEL, turn_id=turn_id, session_id=session_id)]
