"""A model step, top to bottom: claim (one statement, with what the step plan is resolved
from), build the context, route and guard the call, reserve where a limit applies, stream the
completion, review it, and end with one statement (`turns.outcome`) that writes the result and
everything the step learned on the way (`turns.step_record`)."""

from __future__ import annotations

import logging
import random
import time
import uuid

from opentelemetry.trace import get_current_span

from ..agents import agent_tool_name
from ..errors import RetryableError, TerminalError
from ..messages import (
    AssistantMessage,
    AttemptErrorDoc,
    Completion,
    ModelRequest,
    StepRestart,
    Token,
    ToolCall,
    ToolCallRequested,
    ToolResultReady,
)
from ..observability.metrics import count_llm_retry, count_rate_limit_deferral
from ..observability.tracing import record_error
from ..providers.registry import Route
from ..runtime import Runtime, get_runtime
from ..store import steps as step_store
from ..store.db import autocommit_connection
from ..store.step_record_rows import AuditRow
from ..store.steps import Claim
from ..streaming import StepStream, emit_batch_event, tool_results_emitted
from ..vocabulary import DecisionKind, StepKind, TimelineKind, ToolCallStatus, ToolSeverity
from . import step_plan
from .closing import close_model_step
from .context import ModelContext, model_context
from .guards import budget, recovery
from .guards.loop import offered
from .guards.rate_limit import record_output_tokens, take_rate_limit
from .guards.restore import Answered, Sink, record_timings, stream_answer
from .guards.route import CallPlan, plan_call, rerouted
from .leases import Lease, keeper
from .liveness import holder
from .observe import StepOutcome, count_step, step_scope
from .options import AgentCall
from .outcome import Abandon, Commit, Defer, Fail, Outcome, Retry
from .step_plan import StepPlan
from .step_record import StepRecord
from .steps import NextStep

log = logging.getLogger(__name__)

DEPTH_NOTICE = (
    "I stopped here: this turn reached its limit of {cap} model steps without a final answer. "
    "Ask again, perhaps with a narrower request, to continue."
)


class Interrupted(Exception):
    """The step lost its lease, or its turn ended or was cancelled, while streaming."""


def _check(lease: Lease) -> None:
    """Between events: stop once the lease keeper saw the lease lost or the turn cancelled."""
    if lease.lost:
        raise Interrupted("lease lost or turn ended")
    if lease.cancelled:
        raise Interrupted("turn cancelled")


def run_model_step(step_id: uuid.UUID) -> list[NextStep]:
    """Run one delivery of a model step; returns the steps to publish next."""
    rt = get_runtime()
    with autocommit_connection(rt.engine) as db:  # the claim and all it reads: one statement
        claimed = step_store.claim_model_step(
            db, step_id, lease_s=rt.settings.lease_s, holder=holder(rt), **step_plan.switches(rt)
        )
    if claimed is None:
        count_step(StepKind.MODEL, StepOutcome.DUPLICATE)
        return []  # a duplicate delivery, or the turn has ended
    claim, view = claimed
    plan = step_plan.resolve(rt, view)
    ctx = model_context(rt, claim, view, plan)
    ctx = offered(rt, ctx, metadata=view.session_metadata, counts=plan.tool_counts)
    record = StepRecord(claim.step_no)
    with (
        step_scope(claim, session_id=view.session_id),
        keeper(rt).hold(claim.step_id, claim.attempt, watch_turn=claim.turn_id) as lease,
    ):
        outcome = _run(rt, claim, ctx, plan, record, lease)
        return close_model_step(rt, claim, ctx, plan, record, outcome)


def _run(
    rt: Runtime, claim: Claim, ctx: ModelContext, plan: StepPlan, record: StepRecord, lease: Lease
) -> Outcome:
    """Route the step, wait out a rate limit, reserve, stream the completion (past the depth
    cap, the notice instead), review it: how the step ends."""
    route, asked = Route(ctx.provider, ctx.model), ctx.options
    request = ModelRequest(
        model=route.model,
        messages=ctx.messages,
        tools=ctx.tools,
        temperature=rt.settings.llm_temperature if asked.temperature is None else asked.temperature,
        max_tokens=asked.max_output_tokens,
        script=ctx.script,
        call_index=claim.call_index or 0,
        attempt=claim.attempt,
        result_schema=asked.result_schema,
    )
    if asked.agent_call is not None:
        return _agent_call(rt, claim, ctx, plan, route, asked.agent_call)
    if ctx.depth > rt.settings.max_depth:
        return _depth_notice(rt, claim, ctx, plan, record, route)
    try:  # the route, the mode and redaction (which fails closed: nothing is sent)
        call = plan_call(rt, claim, ctx, request, record)
    except Exception as exc:
        return _on_failure(rt, claim, ctx, record, route, exc)
    route, request = call.route, call.request
    if (wait := _rate_limited(rt, claim, record, route, request)) is not None:
        return wait
    caller = budget.Caller(claim, ctx.tenant_id, ctx.session_id, plan.user)
    admitted = budget.admit(rt, caller, plan.budget, route, request, record)
    if isinstance(admitted, budget.Exhausted):
        count_step(StepKind.MODEL, StepOutcome.FAILED)
        return Fail(admitted.code, admitted.message)
    call = rerouted(call, admitted.route, admitted.request)  # the budget may send it elsewhere
    stream = _open_stream(rt, claim, ctx, plan)
    started = time.monotonic()
    try:
        answered = _paid(rt, caller, plan, record, admitted, call, stream, lease)
    except Interrupted:
        return Abandon()
    except Exception as exc:
        return _on_failure(rt, claim, ctx, record, admitted.route, exc)
    completion, route = answered.completion, answered.route
    rt.health.record_success(route.provider)
    record_output_tokens(rt, route, completion.output_tokens)
    latency_ms = int((time.monotonic() - started) * 1000)
    reserved = admitted.hold.amount_micros
    recovered = _review(rt, claim, ctx, plan, record, completion, route, latency_ms, reserved)
    record_timings(rt, answered.timings)  # after the review: it judged against the others
    if recovered:
        return recovered  # retried, fell back, rolled back or failed: this answer is void
    if not _emit_answer(stream, claim, completion):
        return Abandon()
    return Commit(completion, route, latency_ms)


def _paid(
    rt: Runtime,
    caller: budget.Caller,
    plan: StepPlan,
    record: StepRecord,
    admitted: budget.Admitted,
    call: CallPlan,
    stream: StepStream,
    lease: Lease,
) -> Answered:
    """The call streamed, its spend recorded whatever happens: its real cost when it
    answered, else what it held (the provider may have billed it)."""
    first: tuple[Completion, Route] | None = None
    funds = _Funds(rt, caller, plan, record)
    try:
        answered = _stream_completion(rt, caller.claim, call, stream, lease, record, funds)
        first = answered.first_call
    finally:
        budget.spent(rt, caller, plan.budget, admitted, record, first)
    return answered


class _Funds:
    """The step's budget for frugal's second call (`guards.restore.Funds`)."""

    def __init__(
        self, rt: Runtime, caller: budget.Caller, plan: StepPlan, record: StepRecord
    ) -> None:
        self.rt, self.caller, self.plan, self.record = rt, caller, plan, record

    def more(self, route: Route, request: ModelRequest) -> budget.Admitted | None:
        held = budget.hold(
            self.rt, self.caller, self.plan.budget, route, request, self.record, call_no=1
        )
        return budget.Admitted(route, request, held, 1) if isinstance(held, budget.Hold) else None

    def paid(self, admitted: budget.Admitted, answered: tuple[Completion, Route] | None) -> None:
        budget.spent(self.rt, self.caller, self.plan.budget, admitted, self.record, answered)


def _depth_notice(
    rt: Runtime, claim: Claim, ctx: ModelContext, plan: StepPlan, record: StepRecord, route: Route
) -> Outcome:
    """Past the depth cap: a visible notice instead of a call, and the turn fails."""
    stream = _open_stream(rt, claim, ctx, plan)
    text = DEPTH_NOTICE.format(cap=rt.settings.max_depth)
    stream.emit(Token(text=text, step=claim.step_no))
    completion = Completion(text=text)
    found = recovery.findings(
        rt, recovery.Answer(route, completion, 0, None, None), depth_exceeded=True
    )
    outcome = recovery.respond(rt, claim, ctx, record, found, retried=plan.retried)
    if outcome is not None:
        return outcome
    if not _emit_answer(stream, claim, completion):
        return Abandon()
    return Commit(completion, route, 0, depth_exceeded=True)


def _agent_call(
    rt: Runtime, claim: Claim, ctx: ModelContext, plan: StepPlan, route: Route, call: AgentCall
) -> Outcome:
    """A turn that runs one agent (`turns.options.AgentCall`), with no model call: its first
    step calls the agent's tool, the next answers with the agent's result (or the turn fails
    with its error)."""
    tool = agent_tool_name(call.agent)
    ended = [c for c in plan.batch if c["name"] == tool and c["status"] == ToolCallStatus.DONE]
    if ended and ended[0]["is_error"]:
        return Fail("agent_error", ended[0]["result"] or f"the {call.agent} agent failed")
    if ended:
        completion = Completion(text=ended[0]["result"] or "")
    elif ctx.depth > 1:
        return Fail("agent_error", f"the {call.agent} agent's call has no result")
    else:
        asked = ToolCall(f"call_{claim.turn_id.hex}", tool, dict(call.arguments))
        completion = Completion(tool_calls=[asked])
    stream = _open_stream(rt, claim, ctx, plan)
    if not _emit_answer(stream, claim, completion):
        return Abandon()
    return Commit(completion, route, 0)


def _review(
    rt: Runtime,
    claim: Claim,
    ctx: ModelContext,
    plan: StepPlan,
    record: StepRecord,
    completion: Completion,
    route: Route,
    latency_ms: int,
    reserved: int,
) -> Outcome | None:
    """The anomaly detectors on the answer, and the recovery they call for (None: go on)."""
    price = rt.providers.price(route.provider, route.model)
    cost = round(price.cost(completion.input_tokens, completion.output_tokens) * 1e6)
    answer = recovery.Answer(route, completion, latency_ms, reserved, cost)
    found = recovery.findings(rt, answer, depth_exceeded=False)
    return recovery.respond(rt, claim, ctx, record, found, retried=plan.retried)


def _rate_limited(
    rt: Runtime, claim: Claim, record: StepRecord, route: Route, request: ModelRequest
) -> Defer | None:
    """None to go ahead; else the step waits out the rate limit (nothing was streamed: this
    attempt does not count)."""
    decision = take_rate_limit(rt, route, request)
    if decision.defer_s is None:
        return None
    count_rate_limit_deferral(decision.scope)
    waited = {"scope": str(decision.scope), "defer_s": round(decision.defer_s, 3)}
    where = {"provider": route.provider, "model": route.model}
    record.note(TimelineKind.RATE_LIMITED, {**waited, **where}, ending=True)
    return Defer(decision.defer_s)


def _open_stream(rt: Runtime, claim: Claim, ctx: ModelContext, plan: StepPlan) -> StepStream:
    """This attempt's writer; a retry first tells clients to drop the earlier attempt's text,
    and a step after a tool batch first repairs the batch's lost results."""
    stream = StepStream(
        rt.redis,
        claim.turn_id,
        claim.step_no,
        claim.attempt,
        ttl_s=int(rt.settings.turn_timeout_s + rt.settings.stream_ttl_s),
        writer=rt.stream_writer,
        replicas=rt.stream_replicas,
    )
    if claim.attempt > 1:
        stream.emit(StepRestart(step=claim.step_no, attempt=claim.attempt))
    if ctx.parent_step_no is not None and plan.batch:
        _repair_tool_results(rt, ctx, plan)
    return stream


def _repair_tool_results(rt: Runtime, ctx: ModelContext, plan: StepPlan) -> None:
    """Re-emit tool results whose event was lost (a tool worker died after its commit): the
    batch's results were read with the claim."""
    assert ctx.parent_step_no is not None
    seen = tool_results_emitted(rt.redis, ctx.turn_id, model_step_no=ctx.parent_step_no)
    for call in plan.batch:
        if call["call_id"] in seen or call["status"] != ToolCallStatus.DONE:
            continue
        event = ToolResultReady(
            id=call["call_id"],
            name=call["name"],
            is_error=call["is_error"],
            content=call["result"] or "",
            truncated=call["truncated"],
            severity=ToolSeverity(call["severity"]),
            error=call["error_kind"],
        )
        emit_batch_event(rt.redis, ctx.turn_id, model_step_no=ctx.parent_step_no, event=event)


def _emit_answer(stream: StepStream, claim: Claim, completion: Completion) -> bool:
    """The stored message and its tool calls, then wait until every event of the step is in
    the stream (before its tool batch or the end can follow); False if fenced."""
    stream.emit(AssistantMessage(content=completion.text, step=claim.step_no))
    for call in completion.tool_calls:
        stream.emit(ToolCallRequested.of(call, step=claim.step_no))
    return stream.flush()


def _stream_completion(
    rt: Runtime,
    claim: Claim,
    call: CallPlan,
    stream: StepStream,
    lease: Lease,
    record: StepRecord,
    funds: _Funds,
) -> Answered:
    def emit(text: str) -> None:
        if not stream.emit(Token(text=text, step=claim.step_no)):
            raise Interrupted("a newer attempt owns this step")

    def restart() -> None:  # frugal's escalation withdraws the fast model's text
        stream.emit(StepRestart(step=claim.step_no, attempt=claim.attempt))

    sink = Sink(emit, lambda: _check(lease), restart)
    return stream_answer(rt, call, sink, record=record, funds=funds)


def _on_failure(
    rt: Runtime, claim: Claim, ctx: ModelContext, record: StepRecord, route: Route, exc: Exception
) -> Outcome:
    """A provider error fails the turn or retries the step; anything else (a bug or an
    unclassified SDK error) is retried, then visible."""
    record_error(get_current_span(), exc)  # the step's span
    if isinstance(exc, RetryableError | TerminalError):
        exc.message = rt.providers.redact(exc.message)
        _audit_failure(record, route, exc)
        if isinstance(exc, TerminalError):
            count_step(StepKind.MODEL, StepOutcome.FAILED)
            return Fail(exc.code, exc.message)
        rt.health.record_failure(route.provider, exc.message)
        return _retry_or_fail(rt, claim, record, route, exc)
    log.exception("model step %s failed unexpectedly", claim.step_id, exc_info=exc)
    wrapped = RetryableError(
        f"internal error in model step: {type(exc).__name__}: {exc}", code="internal_error"
    )
    _audit_failure(record, route, wrapped)
    return _retry_or_fail(rt, claim, record, route, wrapped)


def backoff(attempt: int, *, base: float, cap: float, retry_after: float | None) -> float:
    """Exponential backoff with full jitter, never shorter than the provider's Retry-After."""
    delay = random.uniform(0, min(cap, base * 2 ** (attempt - 1)))
    return max(delay, retry_after or 0.0)


def _retry_or_fail(
    rt: Runtime, claim: Claim, record: StepRecord, route: Route, exc: RetryableError
) -> Outcome:
    error: AttemptErrorDoc = {
        "code": exc.code,
        "message": exc.message,
        "attempt": claim.attempt,
        "provider": route.provider,
        "model": route.model,
    }
    if claim.attempt >= rt.settings.max_attempts:
        count_step(StepKind.MODEL, StepOutcome.FAILED)
        return Fail(exc.code, f"{exc.message} (gave up after {claim.attempt} attempts)")
    delay = backoff(
        claim.attempt,
        base=rt.settings.retry_base_s,
        cap=rt.settings.retry_max_s,
        retry_after=exc.retry_after,
    )
    count_step(StepKind.MODEL, StepOutcome.RETRIED)
    count_llm_retry(route.provider)
    record.note(TimelineKind.RETRY, {**error, "delay_s": round(delay, 3)}, ending=True)
    return Retry(delay, error, claim.attempt + 1)


def _audit_failure(record: StepRecord, route: Route, exc: Exception) -> None:
    """The audit row of a call that failed (every attempt counts: a retry costs tokens too)."""
    record.audit(
        AuditRow(
            DecisionKind.MODEL,
            f"{route.provider}:{route.model}",
            is_error=True,
            output={"error": str(exc), "code": getattr(exc, "code", "error")},
        )
    )
