"""A tool step: one tool call, run on the `tools` queue through the router; the last call of a
batch starts the next model step (decided under the session's row lock, so exactly once).

`propose_action` is the only tool with an effect, and its effect is only a proposal row,
written in the same transaction as the call's result (a redelivered step adds nothing).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.orm import Session as Db

from ..messages import BatchEvent, ProposalChanged, ToolProgress, ToolResultReady
from ..runtime import Runtime, get_runtime
from ..store import proposals, repo, timeline, tool_results
from ..store import steps as step_store
from ..store.db import autocommit_connection, transaction
from ..store.steps import Claim
from ..streaming import emit_batch_event
from ..tools import Limits, ToolContext, ToolOutcome, run_call
from ..vocabulary import StepKind, TimelineKind, TurnStatus
from .agent_calls import AgentCall, start_call
from .anomalies import detected
from .events import proposal_changed
from .leases import keeper
from .lifecycle import create_model_step
from .liveness import holder
from .loop_guard import WAIT_S, judge
from .observe import StepOutcome, count_step, step_scope, tool_ran, tool_run
from .steps import NextStep, Publish


@dataclass(frozen=True, slots=True)
class _Call:
    """What the step read about its call before running it."""

    claim: Claim
    tool_call_id: uuid.UUID
    call_id: str
    name: str
    arguments: dict[str, Any]
    allowed: list[str] | None
    session_id: uuid.UUID
    session_name: str | None
    tenant_id: uuid.UUID
    parent_no: int

    def emit(self, rt: Runtime, event: BatchEvent) -> None:
        """Append an event to this call's tool batch in the turn's stream."""
        emit_batch_event(rt.redis, self.claim.turn_id, model_step_no=self.parent_no, event=event)


def limits(rt: Runtime) -> Limits:
    s = rt.settings
    return Limits(
        default_timeout_s=s.tool_timeout_s,
        max_timeout_s=s.tool_max_timeout_s,
        progress_after_s=s.tool_progress_after_s,
        output_cap=s.tool_output_cap,
    )


def run_tool_step(step_id: uuid.UUID) -> list[Publish]:
    """Run one delivery of a tool step; returns the next model step once the batch is complete
    (and, for an agent call, the agent task to run)."""
    rt = get_runtime()
    call = _claim(rt, step_id)
    if call is None:
        count_step(StepKind.TOOL, StepOutcome.DUPLICATE)
        return []
    with step_scope(call.claim, session_id=call.session_id):
        if rt.agents.by_tool(call.name) is not None:
            return start_call(rt, _agent_call(call))
        return list(_run_claimed(rt, call))


def _agent_call(call: _Call) -> AgentCall:
    return AgentCall(
        step_id=call.claim.step_id,
        attempt=call.claim.attempt,
        turn_id=call.claim.turn_id,
        tool_call_id=call.tool_call_id,
        call_id=call.call_id,
        name=call.name,
        arguments=call.arguments,
        session_id=call.session_id,
        tenant_id=call.tenant_id,
        model_step_no=call.parent_no,
    )


def _run_claimed(rt: Runtime, call: _Call) -> list[NextStep]:
    """Run the call under the step's lease (unless the loop's guards refuse it or make it
    wait), store its result and announce it."""
    verdict = judge(
        rt, call.claim, session_id=call.session_id, name=call.name, arguments=call.arguments
    )
    if verdict.wait:
        return _wait(rt, call)
    if verdict.anomaly is not None and verdict.data is not None:
        detected(rt, call.claim.turn_id, verdict.anomaly, verdict.data, step=call.claim.step_no)

    def progress(elapsed: float) -> None:
        call.emit(
            rt,
            ToolProgress(
                id=call.call_id,
                name=call.name,
                elapsed_s=round(elapsed, 1),
                message="this tool call is taking longer than usual",
            ),
        )

    with (
        keeper(rt).hold(call.claim.step_id, call.claim.attempt),
        tool_run(call.name, call.call_id, lambda: json.dumps(call.arguments)) as span,
    ):
        outcome = verdict.refused or _run(rt, call, progress)
        tool_ran(span, call.name if call.name in rt.tools else "unknown", outcome)
    done = _commit(rt, call, outcome)
    if done is None:
        count_step(StepKind.TOOL, StepOutcome.DUPLICATE)
        return []
    count_step(StepKind.TOOL, StepOutcome.DONE)
    outcome, proposal, publish = done
    if proposal is not None:
        call.emit(rt, proposal)
    call.emit(
        rt,
        ToolResultReady(
            id=call.call_id,
            name=call.name,
            is_error=outcome.is_error,
            content=outcome.content,
            truncated=outcome.truncated,
            severity=outcome.severity,
            error=outcome.error,
        ),
    )
    return publish


def _wait(rt: Runtime, call: _Call) -> list[NextStep]:
    """Past `max_parallel_tools`: give the step back (this attempt does not count) and look
    again shortly."""
    claim = call.claim
    with transaction(rt.db) as db:
        deferred = step_store.defer_step(db, claim.step_id, claim.attempt, delay_s=WAIT_S)
    if not deferred:
        return []
    count_step(StepKind.TOOL, StepOutcome.DEFERRED)
    return [
        NextStep(
            claim.step_id,
            StepKind.TOOL,
            countdown=WAIT_S,
            turn_id=claim.turn_id,
            session_id=call.session_id,
        )
    ]


def _run(rt: Runtime, call: _Call, progress: Callable[[float], None]) -> ToolOutcome:
    return run_call(
        rt.tools,
        call.name,
        call.arguments,
        allowed=call.allowed,
        limits=limits(rt),
        cursor_key=rt.settings.cursor_key(),
        on_progress=progress,
        ctx=ToolContext(
            session_id=str(call.session_id),
            session_name=call.session_name,
            turn_id=str(call.claim.turn_id),
            call_id=call.call_id,
        ),
    )


def _claim(rt: Runtime, step_id: uuid.UUID) -> _Call | None:
    me = holder(rt)
    with autocommit_connection(rt.engine) as db:  # one statement
        claimed = step_store.claim_tool_step(db, step_id, lease_s=rt.settings.lease_s, holder=me)
    if claimed is None:
        return None
    claim, row = claimed
    assert claim.tool_call_id is not None
    return _Call(
        claim,
        claim.tool_call_id,
        row.call_id,
        row.name,
        row.arguments,
        row.allowed,
        row.session_id,
        row.session_name,
        row.tenant_id,
        row.parent_no,
    )


class _Refused(Exception):
    """A newer attempt owns the step: store nothing."""


def _commit(
    rt: Runtime, call: _Call, outcome: ToolOutcome
) -> tuple[ToolOutcome, ProposalChanged | None, list[NextStep]] | None:
    """Store the result in one statement and, if it completes the batch, add the turn's next
    model step, in one transaction under the session's lock."""
    claim = call.claim
    proposal: ProposalChanged | None = None
    publish: list[NextStep] = []
    try:
        with transaction(rt.db) as db:
            if outcome.effect is not None:
                repo.get_session(db, call.session_id, lock=True)  # the lock comes first
                proposal, outcome = _propose(rt, db, call, outcome)
            if not tool_results.store_result(db, _result(call, outcome, proposal)):
                raise _Refused
            timeline.record(
                db, claim.turn_id, TimelineKind.TOOL, _event(call, outcome), step=claim.step_no
            )
            parent = claim.parent_step_id or claim.step_id
            batch = tool_results.batch_after(db, parent_step_id=parent, turn_id=claim.turn_id)
            if batch.open == 0 and batch.turn_status == TurnStatus.RUNNING:
                publish = create_model_step(
                    db,
                    turn_id=claim.turn_id,
                    session_id=call.session_id,
                    step_no=batch.last_step_no + 1,
                    parent_step_id=claim.parent_step_id,
                )
    except _Refused:
        return None
    return outcome, proposal, publish


def _propose(
    rt: Runtime, db: Db, call: _Call, outcome: ToolOutcome
) -> tuple[ProposalChanged, ToolOutcome]:
    """The proposal row of a `propose_action` call, and the result the model reads of it."""
    effect = outcome.effect
    assert effect is not None
    pid = proposals.create(
        db,
        tool_call_id=call.tool_call_id,
        ttl_s=rt.settings.proposal_ttl_s,
        tenant_id=call.tenant_id,
        session_id=call.session_id,
        turn_id=call.claim.turn_id,
        action=effect.action,
        product=effect.product,
        params=effect.params,
        rationale=effect.rationale,
        blast_radius=effect.blast_radius,
        reversible=effect.reversible,
    )
    row = proposals.get(db, pid, tenant_id=call.tenant_id)
    assert row is not None
    content = {"proposal_id": str(pid), "posted_to_chat": True, "awaits_confirmation": True}
    return proposal_changed(row), replace(outcome, content=json.dumps(content))


def _event(call: _Call, outcome: ToolOutcome) -> dict[str, object]:
    """The timeline's `tool` event: the call and its result."""
    return {
        "call_id": call.call_id,
        "name": call.name,
        "arguments": call.arguments,
        "is_error": outcome.is_error,
        "severity": outcome.severity,
        "error": outcome.error,
        "chars": len(outcome.content),
        "truncated": outcome.truncated,
        "latency_ms": outcome.latency_ms,
    }


def _result(
    call: _Call, outcome: ToolOutcome, proposal: ProposalChanged | None
) -> tool_results.ToolResult:
    claim = call.claim
    return tool_results.ToolResult(
        session_id=call.session_id,
        tenant_id=call.tenant_id,
        turn_id=claim.turn_id,
        step_id=claim.step_id,
        attempt=claim.attempt,
        tool_call_id=call.tool_call_id,
        call_id=call.call_id,
        name=call.name,
        content=outcome.content,
        is_error=outcome.is_error,
        truncated=outcome.truncated,
        severity=outcome.severity,
        error_kind=outcome.error,
        latency_ms=outcome.latency_ms,
        audit_input={"arguments": call.arguments},
        audit_output={
            "chars": len(outcome.content),
            "truncated": outcome.truncated,
            "severity": outcome.severity,
            "error": outcome.error,
            **({"proposal_id": proposal.id} if proposal else {}),
            **({"message": outcome.content[:500]} if outcome.is_error else {}),
        },
    )
