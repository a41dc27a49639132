"""Storing a model step's answer: its message and usage, then either the tool steps it asked
for or the end of the turn (and a summarize step when the history outgrew its window)."""

from __future__ import annotations

import uuid
from typing import Any

from ..messages import Completion
from ..providers.registry import Route
from ..runtime import Runtime
from ..store import repo, tool_calls
from ..store import steps as step_store
from ..store.db import transaction
from ..store.steps import Claim
from .context import ModelContext
from .lifecycle import Ended, announce, promote_next
from .steps import NextStep, step_ref


def model_call_audit(
    claim: Claim, ctx: ModelContext, route: Route, **fields: Any
) -> dict[str, Any]:
    """The audit row of a provider call (every attempt counts: a retry costs tokens too)."""
    return {
        "tenant_id": ctx.tenant_id,
        "session_id": ctx.session_id,
        "turn_id": claim.turn_id,
        "step_id": claim.step_id,
        "kind": "model",
        "name": f"{route.provider}:{route.model}",
        "attempt": claim.attempt,
        "is_error": False,
        **fields,
    }


def record_model_call(
    db: Any, claim: Claim, ctx: ModelContext, route: Route, **fields: Any
) -> None:
    """Store the audit row of a provider call."""
    step_store.record_decision(db, **model_call_audit(claim, ctx, route, **fields))


class _Refused(Exception):
    """The turn is no longer running, or a newer attempt owns the step: store nothing."""


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
    """Store the step's answer and what follows from it, in one transaction of few round
    trips: the session's counters and the turn's totals (ending it when nothing follows) are
    each one `UPDATE … RETURNING`, taken in the lock order session → turn → step."""
    price = rt.providers.price(route.provider, route.model)
    cost = 0.0 if depth_exceeded else price.cost(completion.input_tokens, completion.output_tokens)
    calls = [] if depth_exceeded else completion.tool_calls
    end: str | None = None
    error: dict[str, Any] | None = None
    if depth_exceeded:
        end = "failed"
        error = {
            "code": "depth_exceeded",
            "message": f"stopped after {rt.settings.max_depth} model steps",
        }
    elif not calls:
        end = "done"
    ended: Ended | None = None
    publish: list[NextStep] = []
    try:
        with transaction(rt.db) as db:
            session = repo.count_reply(
                db,
                ctx.session_id,
                input_tokens=completion.input_tokens,
                output_tokens=completion.output_tokens,
                cost=cost,
            )
            turn = repo.add_model_step(
                db,
                claim.turn_id,
                input_tokens=completion.input_tokens,
                output_tokens=completion.output_tokens,
                cost=cost,
                model_steps=0 if depth_exceeded else 1,
                end=end,
                answer=completion.text if end else None,
                error=error,
            )
            if turn is None:
                raise _Refused
            usage = {
                "provider": route.provider,
                "model": route.model,
                "fallback_from": route.fallback_from,
                "input_tokens": completion.input_tokens,
                "output_tokens": completion.output_tokens,
                "cache_read_tokens": completion.cache_read_tokens,
                "cache_write_tokens": completion.cache_write_tokens,
                "cost_usd": cost,
                "latency_ms": latency_ms,
            }
            message = {
                "id": uuid.uuid4(),
                "session_id": ctx.session_id,
                "seq": session.last_message_seq,
                "role": "assistant",
                "content": repo.storable_text(completion.text),
                "turn_id": claim.turn_id,
                "step_id": claim.step_id,
                "tool_calls": repo.storable_json(
                    [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]
                )
                or None,
            }
            audit = None
            if not depth_exceeded:
                audit = model_call_audit(
                    claim,
                    ctx,
                    route,
                    latency_ms=latency_ms,
                    input={"messages": len(ctx.messages), "tools": [t.name for t in ctx.tools]},
                    output={
                        "text_chars": len(completion.text),
                        "tool_calls": len(calls),
                        "input_tokens": completion.input_tokens,
                        "output_tokens": completion.output_tokens,
                    },
                )
            # the step, its message and its audit row: one statement
            if not step_store.finish_model_step(
                db, claim.step_id, claim.attempt, usage=usage, message=message, audit=audit
            ):
                raise _Refused
            if completion.warnings:
                repo.add_turn_warnings(
                    db,
                    claim.turn_id,
                    [
                        {"code": w.code, "message": w.message, "step": claim.step_no}
                        for w in completion.warnings
                    ],
                )
            if calls:
                publish = _create_tool_steps(db, claim, calls)
            else:
                cut_off = step_store.cancel_open_steps(db, claim.turn_id)
                ended = Ended(
                    turn.id,
                    turn.status,
                    turn.input_tokens,
                    turn.output_tokens,
                    turn.cost_usd,
                    turn.error,
                    cut_off,
                )
                if session.last_turn_seq > turn.seq:  # a later turn may be waiting
                    publish = promote_next(rt, db, ctx.session_id)
                if end == "done":
                    publish += _maybe_summarize(rt, db, session, claim)
    except _Refused:
        return []
    announce(rt, ended)
    return publish


def _create_tool_steps(db: Any, claim: Claim, calls: list[Any]) -> list[NextStep]:
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
                kind="tool",
                parent_step_id=claim.step_id,
                tool_call_id=tool_call_id,
            ),
            "tool",
        )
    return publish


def _maybe_summarize(
    rt: Runtime, db: Any, session: repo.SessionCounters, claim: Claim
) -> list[NextStep]:
    if session.last_message_seq - session.summary_upto_seq <= rt.settings.history_window:
        return []
    step_no = step_store.last_step_no(db, claim.turn_id) + 1
    return step_ref(
        step_store.insert_step(
            db,
            turn_id=claim.turn_id,
            step_no=step_no,
            kind="summarize",
            parent_step_id=claim.step_id,
        ),
        "summarize",
    )
