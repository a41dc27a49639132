"""A tool step: one tool call, run on the `tools` queue; the last of a batch starts the next
model step (decided under the session's row lock, so it happens exactly once)."""

from __future__ import annotations

import uuid

from ..runtime import get_runtime
from ..store import repo
from ..store import steps as step_store
from ..store.db import transaction
from ..streaming import emit_tool_result
from ..tools import run_tool
from .lifecycle import create_model_step
from .model_step import tool_result_event
from .steps import NextStep

LEASE_MARGIN_S = 30.0


def run_tool_step(step_id: uuid.UUID) -> list[NextStep]:
    """Run one delivery of a tool step; returns the next model step once the batch is complete."""
    rt = get_runtime()
    timeout = rt.settings.tool_timeout_s
    with transaction(rt.db) as db:
        claim = step_store.claim_step(db, step_id, lease_s=timeout + LEASE_MARGIN_S)
        if claim is None or claim.tool_call_id is None or claim.parent_step_id is None:
            return []
        call = repo.get_tool_call(db, claim.tool_call_id)
        turn = repo.get_turn(db, claim.turn_id)
        assert call is not None and turn is not None
        session = repo.get_session(db, turn.session_id)
        parent = step_store.get_step(db, claim.parent_step_id)
        assert session is not None and parent is not None
        allowed, name, arguments = session.tools, call.name, call.arguments
        call_id, session_id, tenant_id, parent_no = (
            call.call_id,
            session.id,
            session.tenant_id,
            parent.step_no,
        )
    outcome = run_tool(
        rt.tools,
        name,
        arguments,
        allowed=allowed,
        timeout_s=timeout,
        output_cap=rt.settings.tool_output_cap,
    )
    publish: list[NextStep] = []
    with transaction(rt.db) as db:
        repo.get_session(db, session_id, lock=True)
        if not step_store.finish_step(db, step_id, claim.attempt, latency_ms=outcome.latency_ms):
            return []
        repo.record_tool_result(
            db,
            claim.tool_call_id,
            result=outcome.content,
            is_error=outcome.is_error,
            truncated=outcome.truncated,
            latency_ms=outcome.latency_ms,
        )
        repo.insert_message(
            db,
            session_id=session_id,
            role="tool",
            content=outcome.content,
            tool_call_id=call_id,
            name=name,
            is_error=outcome.is_error,
            turn_id=claim.turn_id,
            step_id=step_id,
        )
        step_store.record_decision(
            db,
            tenant_id=tenant_id,
            session_id=session_id,
            turn_id=claim.turn_id,
            step_id=step_id,
            kind="tool",
            name=name,
            attempt=claim.attempt,
            input={"arguments": arguments},
            is_error=outcome.is_error,
            output={
                "chars": len(outcome.content),
                "truncated": outcome.truncated,
                **({"error": outcome.content} if outcome.is_error else {}),
            },
            latency_ms=outcome.latency_ms,
        )
        if step_store.open_children(db, claim.parent_step_id) == 0:
            turn = repo.get_turn(db, claim.turn_id)
            if turn is not None and turn.status == "running":
                publish = create_model_step(
                    db,
                    turn_id=claim.turn_id,
                    session_id=session_id,
                    step_no=step_store.last_step_no(db, claim.turn_id) + 1,
                    parent_step_id=claim.parent_step_id,
                )
    emit_tool_result(
        rt.redis,
        claim.turn_id,
        model_step_no=parent_no,
        data=tool_result_event(call_id, name, outcome.is_error, outcome.content, outcome.truncated),
    )
    return publish
