"""A model step: claim, read context, stream the completion, store it, decide what comes next."""

from __future__ import annotations

import logging
import random
import time
import uuid

from opentelemetry.trace import get_current_span

from ..errors import RetryableError, TerminalError
from ..messages import (
    AssistantMessage,
    Completion,
    ModelRequest,
    StepRestart,
    Token,
    ToolCallRequested,
)
from ..observability.metrics import count_llm_retry, count_rate_limit_deferral
from ..observability.tracing import record_error
from ..providers.registry import Route
from ..runtime import Runtime, get_runtime
from ..store import steps as step_store
from ..store import tool_calls
from ..store.db import autocommit, autocommit_connection, transaction
from ..store.steps import Claim
from ..streaming import StepStream, emit_batch_event, tool_results_emitted
from ..vocabulary import StepKind, TimelineKind, ToolCallStatus
from . import recovery, spend
from .context import ModelContext, load_model_context
from .events import tool_result_of
from .finish import commit_completion, record_model_call
from .guarded_call import CallPlan, plan_call, rerouted
from .guarded_stream import Answered, Sink, stream_answer
from .leases import Lease, keeper
from .lifecycle import announce, fail_turn
from .liveness import holder
from .loop_guard import offered
from .observe import StepOutcome, count_step, step_scope
from .routing import record_output_tokens, take_rate_limit
from .steps import NextStep
from .timeline import note

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
    me = holder(rt)
    with autocommit_connection(rt.engine) as db:  # the claim and its context: one statement
        claimed = step_store.claim_model_step(
            db, step_id, lease_s=rt.settings.lease_s, window=rt.settings.history_window, holder=me
        )
        if claimed is None:
            count_step(StepKind.MODEL, StepOutcome.DUPLICATE)
            return []  # a duplicate delivery, or the turn has ended
        claim, view = claimed
        ctx = load_model_context(rt, db, claim, view)
    ctx = offered(rt, ctx)  # without the tools past their limit in this turn
    with (
        step_scope(claim, session_id=view.session_id),
        keeper(rt).hold(claim.step_id, claim.attempt, watch_turn=claim.turn_id) as lease,
    ):
        return _run_claimed(rt, claim, ctx, lease)


def _run_claimed(rt: Runtime, claim: Claim, ctx: ModelContext, lease: Lease) -> list[NextStep]:
    """Route the step, wait out a rate limit, stream the completion (past the depth cap, the
    notice instead), then store it and decide what comes next."""
    depth_exceeded = ctx.depth > rt.settings.max_depth
    route = Route(ctx.provider, ctx.model)
    request = ModelRequest(
        model=route.model,
        messages=ctx.messages,
        tools=ctx.tools,
        temperature=rt.settings.llm_temperature,
        script=ctx.script,
        call_index=claim.call_index or 0,
        attempt=claim.attempt,
    )
    admitted: spend.Admitted | None = None
    plan: CallPlan | None = None
    if not depth_exceeded:
        try:  # the route, the mode and redaction (which fails closed: nothing is sent)
            plan = plan_call(rt, claim, ctx, request)
        except Exception as exc:
            return _on_failure(rt, claim, ctx, route, exc)
        route, request = plan.route, plan.request
        deferred = _defer_if_rate_limited(rt, claim, route, request)
        if deferred is not None:
            return deferred
        outcome = spend.admit(rt, claim, ctx, route, request)  # reserve its maximum cost
        if isinstance(outcome, list):
            return outcome  # no budget: it waits, or the turn ended
        admitted = outcome
        route, request = admitted.route, admitted.request
    stream = _open_stream(rt, claim, ctx)
    started = time.monotonic()
    try:
        if admitted is None:
            completion = _stream_text(stream, claim, DEPTH_NOTICE.format(cap=rt.settings.max_depth))
        else:
            assert plan is not None
            plan = rerouted(plan, route, request)  # the budget may have sent it elsewhere
            with spend.settling(rt, admitted) as bill:  # at its real cost, or the reserved one
                answered = _stream_completion(rt, claim, ctx, plan, stream, lease)
                completion, route = answered.completion, answered.route
                bill.paid(*answered.first_call)
    except Interrupted:
        return []
    except Exception as exc:
        return _on_failure(rt, claim, ctx, route, exc)
    if not depth_exceeded:
        rt.health.record_success(route.provider)
        record_output_tokens(rt, route, completion.output_tokens)
    latency_ms = int((time.monotonic() - started) * 1000)
    answer = _answer(rt, route, completion, latency_ms, admitted)
    if (recovered := _review(rt, claim, ctx, answer, depth_exceeded)) is not None:
        return recovered  # retried, fell back, rolled back or failed: this answer is void
    if not _emit_answer(stream, claim, completion):
        return []
    count_step(StepKind.MODEL, StepOutcome.DONE)
    return commit_completion(
        rt, claim, ctx, route, completion, latency_ms=latency_ms, depth_exceeded=depth_exceeded
    )


def _answer(
    rt: Runtime,
    route: Route,
    completion: Completion,
    latency_ms: int,
    admitted: spend.Admitted | None,
) -> recovery.Answer:
    """The answer as the anomaly detectors see it: its cost against the reserved estimate."""
    price = rt.providers.price(route.provider, route.model)
    cost = round(price.cost(completion.input_tokens, completion.output_tokens) * 1e6)
    reserved = admitted.held.amount_micros if admitted is not None else None
    return recovery.Answer(route, completion, latency_ms, reserved, cost)


def _review(
    rt: Runtime, claim: Claim, ctx: ModelContext, answer: recovery.Answer, depth_exceeded: bool
) -> list[NextStep] | None:
    """The anomaly detectors on the answer, and the recovery they call for (None: go on)."""
    found = recovery.findings(rt, answer, depth_exceeded=depth_exceeded)
    return recovery.respond(rt, claim, ctx, found)


def _defer_if_rate_limited(
    rt: Runtime, claim: Claim, route: Route, request: ModelRequest
) -> list[NextStep] | None:
    """None to go ahead; else the step waits out the rate limit (nothing was streamed: this
    attempt does not count) and this is what to publish."""
    decision = take_rate_limit(rt, route, request)
    if decision.defer_s is None:
        return None
    count_rate_limit_deferral(decision.scope)
    count_step(StepKind.MODEL, StepOutcome.DEFERRED)
    waited = {"scope": str(decision.scope), "defer_s": round(decision.defer_s, 3)}
    where = {"provider": route.provider, "model": route.model}
    note(rt, claim.turn_id, TimelineKind.RATE_LIMITED, {**waited, **where}, step=claim.step_no)
    with transaction(rt.db) as db:
        deferred = step_store.defer_step(db, claim.step_id, claim.attempt, delay_s=decision.defer_s)
    if not deferred:
        return []
    return [
        NextStep(claim.step_id, StepKind.MODEL, countdown=decision.defer_s, turn_id=claim.turn_id)
    ]


def _open_stream(rt: Runtime, claim: Claim, ctx: ModelContext) -> StepStream:
    """This attempt's writer; a retry first tells clients to drop the earlier attempt's text,
    and a step after a tool batch first repairs the batch's lost results."""
    stream = StepStream(
        rt.redis,
        claim.turn_id,
        claim.step_no,
        claim.attempt,
        ttl_s=int(rt.settings.turn_timeout_s + rt.settings.stream_ttl_s),
        writer=rt.stream_writer,
    )
    if claim.attempt > 1:
        stream.emit(StepRestart(step=claim.step_no, attempt=claim.attempt))
    if ctx.parent_step_no is not None:
        _repair_tool_results(rt, ctx, claim)
    return stream


def _on_failure(
    rt: Runtime, claim: Claim, ctx: ModelContext, route: Route, exc: Exception
) -> list[NextStep]:
    """A provider error fails the turn or retries the step; anything else (a bug or an
    unclassified SDK error) is retried, then visible."""
    record_error(get_current_span(), exc)  # the step's span
    if isinstance(exc, RetryableError | TerminalError):
        exc.message = rt.providers.redact(exc.message)
        if isinstance(exc, TerminalError):
            return _fail(rt, claim, ctx, route, exc)
        rt.health.record_failure(route.provider, exc.message)
        return _retry_or_fail(rt, claim, ctx, route, exc)
    log.exception("model step %s failed unexpectedly", claim.step_id, exc_info=exc)
    wrapped = RetryableError(
        f"internal error in model step: {type(exc).__name__}: {exc}", code="internal_error"
    )
    return _retry_or_fail(rt, claim, ctx, route, wrapped)


def _emit_answer(stream: StepStream, claim: Claim, completion: Completion) -> bool:
    """The stored message and its tool calls, then wait until every event of the step is in
    the stream (before its tool batch or the end can follow); False if fenced."""
    stream.emit(AssistantMessage(content=completion.text, step=claim.step_no))
    for call in completion.tool_calls:
        stream.emit(ToolCallRequested.of(call, step=claim.step_no))
    return stream.flush()


def _stream_text(stream: StepStream, claim: Claim, text: str) -> Completion:
    stream.emit(Token(text=text, step=claim.step_no))
    return Completion(text=text)


def _stream_completion(
    rt: Runtime, claim: Claim, ctx: ModelContext, plan: CallPlan, stream: StepStream, lease: Lease
) -> Answered:
    def emit(text: str) -> None:
        if not stream.emit(Token(text=text, step=claim.step_no)):
            raise Interrupted("a newer attempt owns this step")

    def restart() -> None:  # frugal's escalation withdraws the fast model's text
        stream.emit(StepRestart(step=claim.step_no, attempt=claim.attempt))

    return stream_answer(rt, claim, ctx, plan, Sink(emit, lambda: _check(lease), restart))


def _repair_tool_results(rt: Runtime, ctx: ModelContext, claim: Claim) -> None:
    """Re-emit tool results whose event was lost (a tool worker died after its commit)."""
    assert ctx.parent_step_no is not None and claim.parent_step_id is not None
    seen = tool_results_emitted(rt.redis, ctx.turn_id, model_step_no=ctx.parent_step_no)
    with autocommit(rt.db) as db:  # one read
        calls = tool_calls.of_step(db, claim.parent_step_id)
    for call in calls:
        if call.call_id not in seen and call.status == ToolCallStatus.DONE:
            emit_batch_event(
                rt.redis, ctx.turn_id, model_step_no=ctx.parent_step_no, event=tool_result_of(call)
            )


def _fail(
    rt: Runtime, claim: Claim, ctx: ModelContext, route: Route, exc: TerminalError
) -> list[NextStep]:
    _audit_failure(rt, claim, ctx, route, exc)
    count_step(StepKind.MODEL, StepOutcome.FAILED)
    ended, publish = fail_turn(
        rt, turn_id=claim.turn_id, code=exc.code, message=exc.message, failed_step_id=claim.step_id
    )
    announce(rt, ended)
    return publish


def backoff(attempt: int, *, base: float, cap: float, retry_after: float | None) -> float:
    """Exponential backoff with full jitter, never shorter than the provider's Retry-After."""
    delay = random.uniform(0, min(cap, base * 2 ** (attempt - 1)))
    return max(delay, retry_after or 0.0)


def _retry_or_fail(
    rt: Runtime, claim: Claim, ctx: ModelContext, route: Route, exc: RetryableError
) -> list[NextStep]:
    _audit_failure(rt, claim, ctx, route, exc)
    error = {
        "code": exc.code,
        "message": exc.message,
        "attempt": claim.attempt,
        "provider": route.provider,
        "model": route.model,
    }
    if claim.attempt >= rt.settings.max_attempts:
        count_step(StepKind.MODEL, StepOutcome.FAILED)
        ended, publish = fail_turn(
            rt,
            turn_id=claim.turn_id,
            code=exc.code,
            message=f"{exc.message} (gave up after {claim.attempt} attempts)",
            failed_step_id=claim.step_id,
        )
        announce(rt, ended)
        return publish
    delay = backoff(
        claim.attempt,
        base=rt.settings.retry_base_s,
        cap=rt.settings.retry_max_s,
        retry_after=exc.retry_after,
    )
    count_step(StepKind.MODEL, StepOutcome.RETRIED)
    count_llm_retry(route.provider)
    note(
        rt,
        claim.turn_id,
        TimelineKind.RETRY,
        {**error, "delay_s": round(delay, 3)},
        step=claim.step_no,
    )
    with transaction(rt.db) as db:
        released = step_store.release_for_retry(
            db, claim.step_id, claim.attempt, delay_s=delay, error=error
        )
    if not released:
        return []
    return [
        NextStep(
            claim.step_id,
            StepKind.MODEL,
            countdown=delay,
            turn_id=claim.turn_id,
            session_id=ctx.session_id,
        )
    ]


def _audit_failure(
    rt: Runtime, claim: Claim, ctx: ModelContext, route: Route, exc: Exception
) -> None:
    with transaction(rt.db) as db:
        record_model_call(
            db,
            claim,
            ctx,
            route,
            is_error=True,
            output={"error": str(exc), "code": getattr(exc, "code", "error")},
        )
