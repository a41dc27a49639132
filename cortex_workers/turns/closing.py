"""The statement that ends a model step: its outcome (`turns.outcome`) and its record
(`turns.step_record`), written together (`store.step_commit`).

An ending that ends the turn is written in one statement while no later turn of the session
waits; when one does, promoting it takes a transaction (`_promoting`).
"""

from __future__ import annotations

import uuid
from typing import assert_never

from ..messages import Completion, ToolCall
from ..providers.registry import Route
from ..runtime import Runtime
from ..store import repo
from ..store.db import autocommit_connection, transaction
from ..store.replies import Answer, ErrorDoc, ModelCallAudit, ToolCallDoc, Usage
from ..store.step_commit import (
    Closed,
    Ending,
    FailTurn,
    NewCall,
    Release,
    Reply,
    StepKey,
    close_step,
)
from ..store.steps import Claim
from ..vocabulary import StepKind, TimelineKind, TurnStatus
from .agents.results import child_turn_ended
from .context import ModelContext
from .lifecycle import Ended, announce, promote_next
from .observe import StepOutcome, count_step
from .options import CUT_OFF
from .outcome import Abandon, Commit, Defer, Fail, Outcome, Retry, Rollback
from .rollback import rollback_to_last_checkpoint
from .step_plan import StepPlan
from .step_record import StepRecord
from .steps import NextStep, step_ref


def close_model_step(
    rt: Runtime,
    claim: Claim,
    ctx: ModelContext,
    plan: StepPlan,
    record: StepRecord,
    outcome: Outcome,
) -> list[NextStep]:
    """Write the outcome and the record (see the module's doc); what to publish."""
    key = StepKey(
        ctx.session_id, claim.turn_id, claim.step_id, claim.attempt, ctx.tenant_id, plan.user
    )
    match outcome:
        case Commit():
            return _commit(rt, claim, ctx, plan, key, record, outcome)
        case Retry(delay_s=delay, error=error, next_attempt=nxt):
            closed = _close(rt, key, Release(nxt, delay, error), record)
            return [_again(claim, ctx, delay)] if closed.went else []
        case Defer(delay_s=delay):
            if _close(rt, key, Release(claim.attempt, delay), record).went:
                count_step(StepKind.MODEL, StepOutcome.DEFERRED)
                return [_again(claim, ctx, delay)]
            return []
        case Fail(code=code, message=message):
            failure: ErrorDoc = {"code": code, "message": message}
            record.note(TimelineKind.FAILURE, dict(failure), step=None, ending=True)
            return _ending(rt, claim, ctx, plan, key, record, FailTurn(failure))
        case Rollback(error=error):
            return _rollback(rt, claim, ctx, key, record, error)
        case Abandon():
            _close(rt, key, None, record)
            return []
        case _:
            assert_never(outcome)


def _again(claim: Claim, ctx: ModelContext, delay: float) -> NextStep:
    return NextStep(
        claim.step_id, StepKind.MODEL, countdown=delay, turn_id=claim.turn_id,
        session_id=ctx.session_id,
    )  # fmt: skip


def _close(
    rt: Runtime, key: StepKey, ending: Ending, record: StepRecord, *, gated: bool = False
) -> Closed:
    with autocommit_connection(rt.engine) as db:  # one statement
        closed = close_step(
            db, key, ending, record.rows(), gated=gated,
            alert_pct=rt.settings.llm_budget.alert_at_pct,
        )  # fmt: skip
    _report_alerts(closed)
    return closed


def _report_alerts(closed: Closed) -> None:
    from .guards.alerts import report_alerts

    report_alerts(closed.alerts)


def _commit(
    rt: Runtime,
    claim: Claim,
    ctx: ModelContext,
    plan: StepPlan,
    key: StepKey,
    record: StepRecord,
    c: Commit,
) -> list[NextStep]:
    reply = _reply(rt, claim, ctx, c)
    for warning in c.completion.warnings:  # prompt tools, a refused escalation: on the turn
        record.warn(warning.code, warning.message)
    if reply.end is not None and c.completion.finish_reason == "length":
        record.warn(CUT_OFF, "the answer stopped at its output token limit")
    if reply.end is None:  # tool calls: one tool step each
        closed = _close(rt, key, reply, record)
        if not closed.went:
            count_step(StepKind.MODEL, StepOutcome.DUPLICATE)
            return []
        count_step(StepKind.MODEL, StepOutcome.DONE)
        return [
            NextStep(call.step_id, StepKind.TOOL, turn_id=claim.turn_id, session_id=ctx.session_id)
            for call in reply.calls
        ]
    count_step(StepKind.MODEL, StepOutcome.DONE)
    _note_end(record, reply)
    return _ending(rt, claim, ctx, plan, key, record, reply)


def _ending(
    rt: Runtime,
    claim: Claim,
    ctx: ModelContext,
    plan: StepPlan,
    key: StepKey,
    record: StepRecord,
    ending: Reply | FailTurn,
) -> list[NextStep]:
    """An ending that ends the turn: one statement, unless a later turn waits."""
    closed = _close(rt, key, ending, record, gated=True)
    if closed.owned and not closed.went:
        closed, publish = _promoting(rt, ctx, key, record, ending)
    else:
        publish = []
    if not closed.went or closed.turn is None:
        return publish
    announce(rt, _ended(closed, claim))
    publish += step_ref(
        closed.summarize_step_id, StepKind.SUMMARIZE, turn_id=claim.turn_id,
        session_id=ctx.session_id,
    )  # fmt: skip
    if plan.child:  # a sub-agent's turn: its end ends the agent's task
        publish += child_turn_ended(rt, claim.turn_id)
    return publish


def _promoting(
    rt: Runtime, ctx: ModelContext, key: StepKey, record: StepRecord, ending: Reply | FailTurn
) -> tuple[Closed, list[NextStep]]:
    """The ending again, in a transaction that starts the session's next queued turn (the
    record was written by the first statement, but for what belongs to the ending)."""
    with transaction(rt.db) as db:
        repo.get_session(db, ctx.session_id, lock=True)
        closed = close_step(
            db, key, ending, record.ending_part().rows(),
            alert_pct=rt.settings.llm_budget.alert_at_pct,
        )  # fmt: skip
        publish = promote_next(rt, db, ctx.session_id) if closed.went else []
    return closed, publish


def _ended(closed: Closed, claim: Claim) -> Ended:
    turn = closed.turn
    assert turn is not None
    return Ended(
        turn.id,
        turn.status,
        turn.input_tokens,
        turn.output_tokens,
        turn.cost_usd,
        turn.error,
        closed.cut_off,
        claim.turn_age(),
    )


def _rollback(
    rt: Runtime, claim: Claim, ctx: ModelContext, key: StepKey, record: StepRecord, error: ErrorDoc
) -> list[NextStep]:
    """Restore the last checkpoint and end the turn visibly (`rolled_back`), with the record,
    in one transaction."""
    ended: Ended | None
    with transaction(rt.db) as db:
        repo.get_session(db, ctx.session_id, lock=True)
        close_step(db, key, None, record.rows(), alert_pct=rt.settings.llm_budget.alert_at_pct)
        ended, publish = rollback_to_last_checkpoint(
            rt, db, session_id=ctx.session_id, turn_id=claim.turn_id, error=error
        )
    announce(rt, ended)
    return publish


# --- the reply -------------------------------------------------------------------------------


def _note_end(record: StepRecord, reply: Reply) -> None:
    """The timeline's `completion` of a turn its answer ends (`failure` past the depth cap)."""
    if reply.error is not None:
        failure = {"code": reply.error["code"], "message": reply.error["message"]}
        record.note(TimelineKind.FAILURE, failure, ending=True)
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
    record.note(TimelineKind.COMPLETION, done, ending=True)


def _reply(rt: Runtime, claim: Claim, ctx: ModelContext, c: Commit) -> Reply:
    """The answer as the closing statement stores it."""
    completion, route = c.completion, c.route
    price = rt.providers.price(route.provider, route.model)
    cost = (
        0.0 if c.depth_exceeded else price.cost(completion.input_tokens, completion.output_tokens)
    )
    calls = [] if c.depth_exceeded else completion.tool_calls
    usage = Usage(
        provider=route.provider,
        model=route.model,
        fallback_from=route.fallback_from,
        input_tokens=completion.input_tokens,
        output_tokens=completion.output_tokens,
        cache_read_tokens=completion.cache_read_tokens,
        cache_write_tokens=completion.cache_write_tokens,
        cost_usd=cost,
        latency_ms=c.latency_ms,
    )
    message = _message(completion, calls)
    if c.depth_exceeded:
        why = f"stopped after {rt.settings.max_depth} model steps"
        return Reply(
            usage, message, None, 0, TurnStatus.FAILED,
            repo.storable_text(completion.text), {"code": "depth_exceeded", "message": why},
        )  # fmt: skip
    audit = _audit(ctx, route, completion, calls)
    if calls and ctx.options.client_tool_names() & {c.name for c in calls}:
        # the client runs these: the turn ends with them, its next turn brings their output
        return Reply(
            usage, message, audit, 1, TurnStatus.DONE, repo.storable_text(completion.text),
            summarize_window=rt.settings.history_window,
        )  # fmt: skip
    if calls:
        new = tuple(
            NewCall(uuid.uuid4(), uuid.uuid4(), claim.step_no + 1 + i, call.id, call.name,
                    call.arguments)
            for i, call in enumerate(calls)
        )  # fmt: skip
        return Reply(usage, message, audit, 1, calls=new)
    return Reply(
        usage, message, audit, 1, TurnStatus.DONE, repo.storable_text(completion.text),
        summarize_window=rt.settings.history_window,
    )  # fmt: skip


def _message(completion: Completion, calls: list[ToolCall]) -> Answer:
    """The assistant message (the session, turn, step and seq are the statement's own)."""
    docs = [
        ToolCallDoc(
            id=repo.storable_text(c.id),
            name=repo.storable_text(c.name),
            arguments=repo.storable_json(c.arguments),
        )
        for c in calls
    ]
    return Answer(
        id=uuid.uuid4(), content=repo.storable_text(completion.text), tool_calls=docs or None
    )


def _audit(
    ctx: ModelContext, route: Route, completion: Completion, calls: list[ToolCall]
) -> ModelCallAudit:
    """The audit row of the call that answered (the statement adds its ids and latency)."""
    return ModelCallAudit(
        tenant_id=ctx.tenant_id,
        name=f"{route.provider}:{route.model}",
        input={"messages": len(ctx.messages), "tools": [t.name for t in ctx.tools]},
        output={
            "text_chars": len(completion.text),
            "tool_calls": len(calls),
            "input_tokens": completion.input_tokens,
            "output_tokens": completion.output_tokens,
        },
    )
