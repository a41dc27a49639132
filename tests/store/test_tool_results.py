"""`store_result` and `batch_after`: a tool step's result is stored whole or not at all, and
the batch is complete only when every sibling has finished."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session as Db
from sqlalchemy.orm import sessionmaker
from support import TEST_HOLDER, Stack

from cortex_workers.store import new_turns, repo, tenants, tool_calls, tool_results
from cortex_workers.store import steps as step_store
from cortex_workers.store.db import autocommit, make_engine, make_sessionmaker, transaction
from cortex_workers.store.models import Decision, Message, Step, ToolCallRow
from cortex_workers.vocabulary import StepKind


@pytest.fixture(scope="module")
def factory(stack: Stack) -> Iterator[sessionmaker[Db]]:
    engine = make_engine(stack.database_url, pool_size=2)
    yield make_sessionmaker(engine)
    engine.dispose()


def _batch_of_two(factory: sessionmaker[Db]) -> tuple[Any, list[tuple[Any, Any]]]:
    """A running turn whose model step asked for two tool calls; both tool steps claimed."""
    with transaction(factory) as db:
        tenant = tenants.ensure_tenant(db, f"results-{uuid.uuid4().hex[:8]}")
        session = repo.insert_session(db, tenant.id)
        new = new_turns.insert_turn(
            db, tenant_id=tenant.id, session_id=session.id, start_timeout_s=60, content="hi"
        )
        tool_steps = []
        for i in range(2):
            call = tool_calls.insert_tool_call(
                db,
                turn_id=new.id,
                step_id=new.first_step_id,
                call_id=f"call_{i}",
                name="calculate",
                arguments={"expression": "1+1"},
            )
            tool_steps.append(
                step_store.insert_step(
                    db,
                    turn_id=new.id,
                    step_no=2 + i,
                    kind=StepKind.TOOL,
                    parent_step_id=new.first_step_id,
                    tool_call_id=call,
                )
            )
    claimed = []
    for step_id in tool_steps:
        assert step_id is not None
        with autocommit(factory) as db:
            got = step_store.claim_tool_step(db, step_id, lease_s=30, holder=TEST_HOLDER)
        assert got is not None
        claimed.append(got)
    return new, claimed


def _result(claim: Any, row: Any, **kw: Any) -> tool_results.ToolResult:
    fields: dict[str, Any] = {
        "session_id": row.session_id,
        "tenant_id": row.tenant_id,
        "turn_id": claim.turn_id,
        "step_id": claim.step_id,
        "attempt": claim.attempt,
        "tool_call_id": claim.tool_call_id,
        "call_id": row.call_id,
        "name": row.name,
        "content": "2",
        "is_error": False,
        "truncated": False,
        "severity": "ok",
        "error_kind": None,
        "latency_ms": 3,
        "audit_input": {"arguments": row.arguments},
        "audit_output": {"chars": 1},
    }
    return tool_results.ToolResult(**{**fields, **kw})


def _stored(factory: sessionmaker[Db], claim: Any) -> dict[str, Any]:
    with transaction(factory) as db:
        step = db.get(Step, claim.step_id)
        call = db.get(ToolCallRow, claim.tool_call_id)
        assert step is not None and call is not None
        return {
            "step": step.status,
            "call": (call.status, call.result),
            "messages": db.execute(
                select(Message.seq, Message.role, Message.content, Message.tool_call_id).where(
                    Message.step_id == claim.step_id
                )
            ).all(),
            "audits": db.execute(
                select(func.count()).where(Decision.step_id == claim.step_id)
            ).scalar_one(),
        }


def test_the_claim_reads_the_call_and_its_session(factory: sessionmaker[Db]) -> None:
    new, [(claim, row), _] = _batch_of_two(factory)
    assert (claim.kind, claim.attempt, claim.parent_step_id) == ("tool", 1, new.first_step_id)
    assert (row.call_id, row.name, row.arguments) == ("call_0", "calculate", {"expression": "1+1"})
    assert (row.session_id, row.parent_no) == (new.session_id, 1)


def test_a_result_is_stored_whole_and_the_batch_completes_with_its_last_call(
    factory: sessionmaker[Db],
) -> None:
    new, [(first, first_row), (second, second_row)] = _batch_of_two(factory)
    with transaction(factory) as db:
        assert tool_results.store_result(db, _result(first, first_row))
        batch = tool_results.batch_after(db, parent_step_id=new.first_step_id, turn_id=new.id)
    assert (batch.open, batch.turn_status, batch.last_step_no) == (1, "running", 3)
    assert _stored(factory, first) == {
        "step": "done",
        "call": ("done", "2"),
        "messages": [(2, "tool", "2", "call_0")],
        "audits": 1,
    }
    with transaction(factory) as db:
        assert tool_results.store_result(db, _result(second, second_row, content="x"))
        batch = tool_results.batch_after(db, parent_step_id=new.first_step_id, turn_id=new.id)
    assert batch.open == 0
    assert _stored(factory, second)["messages"] == [(3, "tool", "x", "call_1")]


def test_a_zombie_attempt_stores_nothing(factory: sessionmaker[Db]) -> None:
    _, [(claim, row), _] = _batch_of_two(factory)
    before = _stored(factory, claim)
    with transaction(factory) as db:
        stale = _result(claim, row, attempt=claim.attempt + 1)
        assert not tool_results.store_result(db, stale)
    assert (
        _stored(factory, claim)
        == before
        == {
            "step": "leased",
            "call": ("pending", None),
            "messages": [],
            "audits": 0,
        }
    )
