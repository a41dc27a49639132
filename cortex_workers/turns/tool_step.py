"""A tool step, top to bottom: claim (one statement, with what the loop's guards read), run
the call through the router under the step's lease, and end with one statement that stores the
result with the step's record; the result that completes its batch adds the turn's next model
step in that statement (decided under the session's row lock and the batch's count, so exactly
once).

A call its MCP server answers with a task is parked instead (`parked`): the step stays
leased, held by no worker, until a poll finds the task ended and stores its result.

`propose_action`'s effect is only a proposal row, written by the same statement as the call's
result (a redelivered step adds nothing). A tool with effects outside our database is recorded
as an intent before it is sent (`tool_intents`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from ..messages import BatchEvent, ProposalChanged, ToolProgress
from ..runtime import Runtime, get_runtime
from ..store import proposals
from ..store import steps as step_store
from ..store.db import autocommit_connection
from ..store.proposals import ProposalDoc
from ..store.step_commit import NewProposal, Release, StepKey, close_step
from ..store.step_views import ToolStepView
from ..store.steps import Claim
from ..streaming import emit_batch_event
from ..tools import ToolContext, ToolOutcome, run_call
from ..vocabulary import ProposalStatus, StepKind, TimelineKind
from .agents.calls import AgentCall, start_call
from .guards.anomalies import detected
from .guards.loop import WAIT_S, judge
from .leases import keeper
from .liveness import holder
from .observe import StepOutcome, count_step, step_scope, tool_ran, tool_run
from .parked.park import WaitingCall, park_call
from .step_record import StepRecord
from .steps import NextStep, Publish, step_ref
from .tool_intents import before_call
from .tool_limits import limits
from .tool_results import CallResult


@dataclass(frozen=True, slots=True)
class _Call:
    """A claimed tool step and what its claim read about the call."""

    claim: Claim
    view: ToolStepView

    @property
    def tool_call_id(self) -> uuid.UUID:
        assert self.claim.tool_call_id is not None
        return self.claim.tool_call_id

    @property
    def name(self) -> str:
        return self.view.name

    @property
    def call_id(self) -> str:
        return self.view.call_id

    @property
    def key(self) -> StepKey:
        c, v = self.claim, self.view
        return StepKey(v.session_id, c.turn_id, c.step_id, c.attempt, v.tenant_id)

    def emit(self, rt: Runtime, event: BatchEvent) -> None:
        """Append an event to this call's tool batch in the turn's stream."""
        emit_batch_event(
            rt.redis, self.claim.turn_id, model_step_no=self.view.parent_no, event=event
        )


def run_tool_step(step_id: uuid.UUID) -> list[Publish]:
    """Run one delivery of a tool step; returns the next model step once the batch is complete
    (and, for an agent call, the agent task to run)."""
    rt = get_runtime()
    with autocommit_connection(rt.engine) as db:  # one statement
        claimed = step_store.claim_tool_step(
            db, step_id, lease_s=rt.settings.lease_s, holder=holder(rt)
        )
    if claimed is None:
        count_step(StepKind.TOOL, StepOutcome.DUPLICATE)
        return []
    call = _Call(*claimed)
    with step_scope(call.claim, session_id=call.view.session_id):
        if rt.agents.by_tool(call.name) is not None:
            return start_call(rt, _agent_call(call))
        return list(_run_claimed(rt, call))


def _agent_call(call: _Call) -> AgentCall:
    v = call.view
    return AgentCall(
        step_id=call.claim.step_id,
        attempt=call.claim.attempt,
        turn_id=call.claim.turn_id,
        tool_call_id=call.tool_call_id,
        call_id=v.call_id,
        name=v.name,
        arguments=v.arguments,
        session_id=v.session_id,
        tenant_id=v.tenant_id,
        model_step_no=v.parent_no,
    )


def _run_claimed(rt: Runtime, call: _Call) -> list[Publish]:
    """Run the call under the step's lease (unless the loop's guards refuse it or make it
    wait), then store its result with the step's record and announce it; a call answered with
    a task is parked until the task ends (`parked`)."""
    record = StepRecord(call.claim.step_no)
    verdict = judge(rt, call.view)
    if verdict.wait:
        return _wait(rt, call, record)
    if verdict.anomaly is not None and verdict.data is not None:
        detected(rt, record, verdict.anomaly, verdict.data)

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
        tool_run(call.name, call.call_id, lambda: json.dumps(call.view.arguments)) as span,
    ):
        outcome = verdict.refused or _run(rt, call, progress)
        tool_ran(span, call.name if call.name in rt.tools else "unknown", outcome)
    if outcome.task is not None:
        return park_call(rt, _waiting(call), outcome.task, record.rows())
    outcome, proposal = _proposed(rt, call, outcome)
    result = CallResult(call.tool_call_id, call.call_id, call.name, call.view.arguments, outcome)
    record.note(TimelineKind.TOOL, result.timeline_event(), ending=True)
    with autocommit_connection(rt.engine) as db:  # one statement
        closed = close_step(db, call.key, result.done(proposal), record.rows())
    if not closed.went:
        count_step(StepKind.TOOL, StepOutcome.DUPLICATE)
        return []
    count_step(StepKind.TOOL, StepOutcome.DONE)
    if closed.proposal is not None:
        call.emit(rt, _proposal_event(closed.proposal))
    call.emit(rt, result.ready())
    turn_id, session_id = call.claim.turn_id, call.view.session_id
    return [*step_ref(closed.next_step_id, StepKind.MODEL, turn_id=turn_id, session_id=session_id)]


def _waiting(call: _Call) -> WaitingCall:
    v = call.view
    return WaitingCall(
        key=call.key,
        step_no=call.claim.step_no,
        model_step_no=v.parent_no,
        tool_call_id=call.tool_call_id,
        call_id=v.call_id,
        name=v.name,
        arguments=v.arguments,
    )


def _wait(rt: Runtime, call: _Call, record: StepRecord) -> list[Publish]:
    """Past `max_parallel_tools`: give the step back (this attempt does not count) and look
    again shortly."""
    claim = call.claim
    with autocommit_connection(rt.engine) as db:  # one statement
        closed = close_step(db, call.key, Release(claim.attempt, WAIT_S), record.rows())
    if not closed.went:
        return []
    count_step(StepKind.TOOL, StepOutcome.DEFERRED)
    return [
        NextStep(
            claim.step_id,
            StepKind.TOOL,
            countdown=WAIT_S,
            turn_id=claim.turn_id,
            session_id=call.view.session_id,
        )
    ]


def _run(rt: Runtime, call: _Call, progress: Callable[[float], None]) -> ToolOutcome:
    v = call.view
    intent = before_call(
        rt,
        tool_call_id=call.tool_call_id,
        turn_id=call.claim.turn_id,
        model_step_no=v.parent_no,
        call_id=v.call_id,
        name=v.name,
        attempt=call.claim.attempt,
    )
    if intent.refused is not None:
        return intent.refused
    return run_call(
        rt.tools,
        v.name,
        v.arguments,
        allowed=v.allowed,
        limits=limits(rt),
        cursor_key=rt.settings.cursor_key(),
        on_progress=progress,
        ctx=ToolContext(
            session_id=str(v.session_id),
            session_name=v.session_name,
            turn_id=str(call.claim.turn_id),
            call_id=v.call_id,
            tenant_id=str(v.tenant_id),
            tenant_name=v.tenant_name,
            idempotency_key=intent.key,
        ),
    )


def _proposed(
    rt: Runtime, call: _Call, outcome: ToolOutcome
) -> tuple[ToolOutcome, NewProposal | None]:
    """A `propose_action` call's proposal (stored with the result), and the result the model
    reads of it."""
    effect = outcome.effect
    if effect is None:
        return outcome, None
    pid = proposals.proposal_id_for(call.tool_call_id)
    proposal = NewProposal(
        id=pid,
        ttl_s=rt.settings.proposal_ttl_s,
        action=effect.action,
        product=effect.product,
        params=effect.params,
        rationale=effect.rationale,
        blast_radius=effect.blast_radius,
        reversible=effect.reversible,
    )
    content = {"proposal_id": str(pid), "posted_to_chat": True, "awaits_confirmation": True}
    return replace(outcome, content=json.dumps(content)), proposal


def _proposal_event(row: ProposalDoc) -> ProposalChanged:
    """`proposal`, from the row the statement stored."""
    params = row["params"]
    return ProposalChanged(
        id=str(row["id"]),
        action=str(row["action"]),
        product=str(row["product"]),
        rationale=str(row["rationale"]),
        status=ProposalStatus(str(row["status"])),
        params=params if isinstance(params, dict) else {},
        blast_radius=None if row["blast_radius"] is None else str(row["blast_radius"]),
        reversible=None if row["reversible"] is None else bool(row["reversible"]),
        expires_at=None if row["expires_at"] is None else _iso(str(row["expires_at"])),
    )


def _iso(moment: str) -> str:
    """A timestamp as the API writes it (UTC, ISO 8601), from the one Postgres's JSON has."""
    return datetime.fromisoformat(moment).astimezone(UTC).isoformat()
