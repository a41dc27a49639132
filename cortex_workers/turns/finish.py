"""Storing a model step's answer: its message and usage, then either the tool steps it asked
for or the end of the turn (and a summarize step when the history outgrew its window)."""

from __future__ import annotations

import uuid
from typing import TypedDict

from sqlalchemy.orm import Session as Db

from ..messages import Completion, ToolCall
from ..providers.registry import Route
from ..runtime import Runtime
from ..store import replies, repo, tool_calls
from ..store import steps as step_store
from ..store.db import autocommit_connection, transaction
from ..store.steps import Claim
from ..vocabulary import DecisionKind, StepKind, TimelineKind, TurnStatus
from .agent_results import child_turn_ended
from .context import ModelContext
from .lifecycle import Ended, announce, promote_next
from .steps import NextStep, step_ref
from .timeline import note


class ModelCallInput(TypedDict):
    """What the audit row of a model call says was asked."""

    messages: int
    tools: list[str]


class ModelCallOutput(TypedDict):
    """What the audit row of a model call that answered says came back."""

    text_chars: int
    tool_calls: int
    input_tokens: int
    output_tokens: int


class ModelCallFailure(TypedDict):
    """What the audit row of a model call that failed says went wrong."""

    error: str
    code: str


def record_model_call(
    db: Db,
    claim: Claim,
    ctx: ModelContext,
    route: Route,
    *,
    is_error: bool = False,
    latency_ms: int | None = None,
    input: ModelCallInput | None = None,
    output: ModelCallOutput | ModelCallFailure | None = None,
) -> None:
    """Store the audit row of a provider call (every attempt counts: a retry costs tokens
    too)."""
    step_store.record_decision(
        db,
        tenant_id=ctx.tenant_id,
        session_id=ctx.session_id,
        turn_id=claim.turn_id,
        step_id=claim.step_id,
        kind=DecisionKind.MODEL,
        name=_call_name(route),
        attempt=claim.attempt,
        is_error=is_error,
        latency_ms=latency_ms,
        input=dict(input) if input is not None else None,
        output=dict(output) if output is not None else None,
    )


def _call_name(route: Route) -> str:
    return f"{route.provider}:{route.model}"


def commit_completion(
    rt: Runtime,
    claim: Claim,
    ctx: ModelContext,
    route: Route,
    completion: Completion,
    *,
    latency_ms: int,
    depth_exceeded: bool,
) -> list[NextStep]:
    """Store the step's answer and what follows from it, atomically.

    A reply that ends the turn is one statement on its own (`store.replies`), unless it has
    warnings to record or a later turn of the session waits to be promoted: then, like a reply
    that asks for tools, it is stored in a transaction with what follows from it."""
    reply = _reply(
        rt, claim, ctx, route, completion, latency_ms=latency_ms, depth_exceeded=depth_exceeded
    )
    if reply.end is not None and not completion.warnings:
        with autocommit_connection(rt.engine) as db:
            stored = replies.store_reply(db, reply, gated=True)
        if not stored.owned:
            return []
        if stored.turn is not None:
            _announce(rt, stored, claim, reply)
            return step_ref(
                stored.summarize_step_id,
                StepKind.SUMMARIZE,
                turn_id=claim.turn_id,
                session_id=ctx.session_id,
            ) + child_turn_ended(rt, claim.turn_id)
    publish: list[NextStep] = []
    with transaction(rt.db) as db:
        stored = replies.store_reply(db, reply)
        if stored.turn is None or stored.session is None:
            return []  # the turn is no longer running, or a newer attempt owns the step
        if completion.warnings:
            repo.add_turn_warnings(
                db,
                claim.turn_id,
                [
                    {"code": w.code, "message": w.message, "step": claim.step_no}
                    for w in completion.warnings
                ],
            )
        if reply.end is None:
            publish = _create_tool_steps(db, claim, completion.tool_calls, ctx.session_id)
        else:
            if stored.session.last_turn_seq > stored.turn.seq:  # a later turn may be waiting
                publish = promote_next(rt, db, ctx.session_id)
            publish += step_ref(
                stored.summarize_step_id,
                StepKind.SUMMARIZE,
                turn_id=claim.turn_id,
                session_id=ctx.session_id,
            )
    if reply.end is not None:
        _announce(rt, stored, claim, reply)
        publish += child_turn_ended(rt, claim.turn_id)
    return publish


def _announce(rt: Runtime, stored: replies.Stored, claim: Claim, reply: replies.Reply) -> None:
    announce(rt, _ended(stored, claim))
    _note_end(rt, claim, reply)


def _note_end(rt: Runtime, claim: Claim, reply: replies.Reply) -> None:
    """The timeline's `completion` of a turn its answer ended (`failure` past the depth cap)."""
    if reply.error is not None:
        failure = {"code": reply.error["code"], "message": reply.error["message"]}
        note(rt, claim.turn_id, TimelineKind.FAILURE, failure, step=claim.step_no)
        return
    usage = reply.usage
    done = {
        "provider": usage.provider,
        "model": usage.model,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cost_usd": usage.cost_usd,
        "latency_ms": usage.latency_ms,
        "chars": len(reply.answer or ""),
    }
    note(rt, claim.turn_id, TimelineKind.COMPLETION, done, step=claim.step_no)


def _reply(
    rt: Runtime,
    claim: Claim,
    ctx: ModelContext,
    route: Route,
    completion: Completion,
    *,
    latency_ms: int,
    depth_exceeded: bool,
) -> replies.Reply:
    price = rt.providers.price(route.provider, route.model)
    cost = 0.0 if depth_exceeded else price.cost(completion.input_tokens, completion.output_tokens)
    calls = [] if depth_exceeded else completion.tool_calls
    end, error = _end(rt, depth_exceeded=depth_exceeded, asks_for_tools=bool(calls))
    return replies.Reply(
        session_id=ctx.session_id,
        turn_id=claim.turn_id,
        step_id=claim.step_id,
        attempt=claim.attempt,
        input_tokens=completion.input_tokens,
        output_tokens=completion.output_tokens,
        cost=cost,
        model_steps=0 if depth_exceeded else 1,
        usage=_usage(route, completion, cost=cost, latency_ms=latency_ms),
        message=_answer(completion, calls),
        audit=None if depth_exceeded else _audit(ctx, route, completion, calls),
        end=end,
        answer=repo.storable_text(completion.text) if end else None,
        error=error,
        summarize_window=rt.settings.history_window if end == TurnStatus.DONE else None,
    )


def _end(
    rt: Runtime, *, depth_exceeded: bool, asks_for_tools: bool
) -> tuple[TurnStatus | None, replies.ErrorDoc | None]:
    """How the reply ends the turn, if it does: failed past the depth cap, done when it asks
    for no tool."""
    if depth_exceeded:
        message = f"stopped after {rt.settings.max_depth} model steps"
        return TurnStatus.FAILED, replies.ErrorDoc(code="depth_exceeded", message=message)
    return (None, None) if asks_for_tools else (TurnStatus.DONE, None)


def _usage(route: Route, completion: Completion, *, cost: float, latency_ms: int) -> replies.Usage:
    return replies.Usage(
        provider=route.provider,
        model=route.model,
        fallback_from=route.fallback_from,
        input_tokens=completion.input_tokens,
        output_tokens=completion.output_tokens,
        cache_read_tokens=completion.cache_read_tokens,
        cache_write_tokens=completion.cache_write_tokens,
        cost_usd=cost,
        latency_ms=latency_ms,
    )


def _answer(completion: Completion, calls: list[ToolCall]) -> replies.Answer:
    """The assistant message (the session, turn, step and seq are the statement's own)."""
    docs = [
        replies.ToolCallDoc(
            id=repo.storable_text(c.id),
            name=repo.storable_text(c.name),
            arguments=repo.storable_json(c.arguments),
        )
        for c in calls
    ]
    return replies.Answer(
        id=uuid.uuid4(), content=repo.storable_text(completion.text), tool_calls=docs or None
    )


def _audit(
    ctx: ModelContext, route: Route, completion: Completion, calls: list[ToolCall]
) -> replies.ModelCallAudit:
    """The audit row of the call that answered (the statement adds its ids and latency)."""
    asked = ModelCallInput(messages=len(ctx.messages), tools=[t.name for t in ctx.tools])
    answered = ModelCallOutput(
        text_chars=len(completion.text),
        tool_calls=len(calls),
        input_tokens=completion.input_tokens,
        output_tokens=completion.output_tokens,
    )
    return replies.ModelCallAudit(
        tenant_id=ctx.tenant_id, name=_call_name(route), input=dict(asked), output=dict(answered)
    )


def _ended(stored: replies.Stored, claim: Claim) -> Ended:
    turn = stored.turn
    assert turn is not None
    return Ended(
        turn.id,
        turn.status,
        turn.input_tokens,
        turn.output_tokens,
        turn.cost_usd,
        turn.error,
        stored.cut_off,
        claim.turn_age(),
    )


def _create_tool_steps(
    db: Db, claim: Claim, calls: list[ToolCall], session_id: uuid.UUID
) -> list[NextStep]:
    publish: list[NextStep] = []
    for i, call in enumerate(calls):
        tool_call_id = tool_calls.insert_tool_call(
            db,
            turn_id=claim.turn_id,
            step_id=claim.step_id,
            call_id=call.id,
            name=call.name,
            arguments=call.arguments,
        )
        publish += step_ref(
            step_store.insert_step(
                db,
                turn_id=claim.turn_id,
                step_no=claim.step_no + 1 + i,
                kind=StepKind.TOOL,
                parent_step_id=claim.step_id,
                tool_call_id=tool_call_id,
            ),
            StepKind.TOOL,
            turn_id=claim.turn_id,
            session_id=session_id,
        )
    return publish
