"""`close_step`: a step ends with one statement that writes its ending whole or not at all,
and the step's record (timeline, audit rows, spend) with it."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import pytest
from psycopg import _queries
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session as Db
from sqlalchemy.orm import sessionmaker
from support import TEST_HOLDER, Stack

from cortex_workers.store import new_turns, replies, repo, tenants
from cortex_workers.store import steps as step_store
from cortex_workers.store.db import autocommit, make_engine, make_sessionmaker, transaction
from cortex_workers.store.models import Decision, Message, Session, Step, ToolCallRow, Turn
from cortex_workers.store.step_commit import (
    NewCall,
    Release,
    Reply,
    StepKey,
    ToolDone,
    close_step,
    statement_texts,
)
from cortex_workers.store.step_record_rows import (
    CounterMove,
    RecordRows,
    Spend,
    TimelineRow,
    Warning,
)
from cortex_workers.store.timeline import of_turn
from cortex_workers.vocabulary import StepKind, TimelineKind, ToolSeverity, TurnStatus

pytestmark = pytest.mark.servers


@pytest.fixture(scope="module")
def factory(stack: Stack) -> Iterator[sessionmaker[Db]]:
    engine = make_engine(stack.database_url, pool_size=4)
    yield make_sessionmaker(engine)
    engine.dispose()


@dataclass
class Running:
    key: StepKey
    tenant_id: uuid.UUID


def _running_turn(factory: sessionmaker[Db], *, extra_steps: int = 0) -> Running:
    """A session with one running turn whose first model step is claimed (attempt 1), and
    `extra_steps` more pending model steps of that turn."""
    with transaction(factory) as db:
        tenant = tenants.ensure_tenant(db, f"commit-{uuid.uuid4().hex[:8]}")
        session = repo.insert_session(db, tenant.id)
        new = new_turns.insert_turn(
            db, tenant_id=tenant.id, session_id=session.id, start_timeout_s=60, content="hi"
        )
        for i in range(extra_steps):
            step_store.insert_step(db, turn_id=new.id, step_no=2 + i, kind=StepKind.MODEL)
    assert new.first_step_id is not None
    with transaction(factory) as db:
        claimed = step_store.claim_model_step(
            db, new.first_step_id, lease_s=30, window=20, holder=TEST_HOLDER
        )
    assert claimed is not None
    key = StepKey(session.id, new.id, new.first_step_id, claimed[0].attempt, tenant.id)
    return Running(key, tenant.id)


def _reply(**kw: Any) -> Reply:
    fields: dict[str, Any] = {
        "usage": replies.Usage(
            provider="scripted",
            model="m",
            fallback_from=None,
            input_tokens=7,
            output_tokens=3,
            cache_read_tokens=0,
            cache_write_tokens=0,
            cost_usd=0.5,
            latency_ms=12,
        ),
        "message": replies.Answer(id=uuid.uuid4(), content="the answer", tool_calls=None),
        "audit": replies.ModelCallAudit(
            tenant_id=uuid.uuid4(), name="scripted:m", input={"messages": 1}, output={}
        ),
        "model_steps": 1,
        "end": TurnStatus.DONE,
        "answer": "the answer",
        "summarize_window": 20,
    }
    return Reply(**{**fields, **kw})


def _state(factory: sessionmaker[Db], r: Running) -> dict[str, Any]:
    k = r.key
    with transaction(factory) as db:
        session = db.get(Session, k.session_id)
        turn = db.get(Turn, k.turn_id)
        assert session is not None and turn is not None
        steps = db.execute(
            select(Step.step_no, Step.kind, Step.status).where(Step.turn_id == k.turn_id)
        ).all()
        return {
            "session": (
                session.last_message_seq,
                session.input_tokens,
                session.output_tokens,
                float(session.cost_usd),
            ),
            "turn": (turn.status, turn.input_tokens, turn.model_steps, turn.answer),
            "steps": sorted(tuple(s) for s in steps),
            "messages": [
                (m.seq, m.role, m.content)
                for m in db.execute(
                    select(Message).where(Message.session_id == k.session_id).order_by(Message.seq)
                ).scalars()
            ],
            "audits": db.execute(
                select(func.count()).where(Decision.step_id == k.step_id)
            ).scalar_one(),
        }


def _close(factory: sessionmaker[Db], r: Running, ending: Any, **kw: Any) -> Any:
    record = kw.pop("record", RecordRows())
    with autocommit(factory) as db:
        return close_step(db, kw.pop("key", r.key), ending, record, **kw)


def test_a_final_reply_is_stored_whole_in_one_statement(factory: sessionmaker[Db]) -> None:
    r = _running_turn(factory, extra_steps=1)
    closed = _close(factory, r, _reply(), gated=True)
    assert closed.owned and closed.went and closed.turn is not None and closed.session is not None
    assert (closed.turn.status, closed.turn.input_tokens, closed.turn.cost_usd) == ("done", 7, 0.5)
    assert closed.session.last_message_seq == 2
    assert closed.summarize_step_id is None  # two messages: far within the window
    assert closed.cut_off is None  # the other open step was never claimed
    assert _state(factory, r) == {
        "session": (2, 7, 3, 0.5),
        "turn": ("done", 7, 1, "the answer"),
        "steps": [(1, "model", "done"), (2, "model", "cancelled")],
        "messages": [(1, "user", "hi"), (2, "assistant", "the answer")],
        "audits": 1,
    }


def test_a_refused_ending_stores_nothing_but_the_record(factory: sessionmaker[Db]) -> None:
    r = _running_turn(factory)
    before = _state(factory, r)
    zombie = replace(r.key, attempt=r.key.attempt + 1)  # a newer attempt owns the step
    seen = TimelineRow(TimelineKind.ROUTE, {"provider": "scripted"}, 1, datetime.now(UTC))
    ended = replace(seen, kind=TimelineKind.COMPLETION, ending=True)
    record = RecordRows(events=(seen, ended))
    for gated in (False, True):
        closed = _close(factory, r, _reply(), key=zombie, gated=gated, record=record)
        assert not closed.owned and not closed.went
    assert _state(factory, r) == before
    # what the zombie saw is still a fact of its attempt; its ending is not
    with transaction(factory) as db:
        assert [e.kind for e in of_turn(db, r.key.turn_id)] == ["route", "route"]
    with transaction(factory) as db:  # the turn was cancelled meanwhile
        repo.end_turn(db, r.key.turn_id, status=TurnStatus.CANCELLED)
    cancelled = _state(factory, r)
    assert not _close(factory, r, _reply(), gated=True).owned
    assert not _close(factory, r, _reply()).owned
    assert _state(factory, r) == cancelled
    assert cancelled["session"] == before["session"]
    assert cancelled["messages"] == before["messages"] and cancelled["audits"] == 0


def test_a_gated_ending_stores_nothing_while_a_later_turn_waits(
    factory: sessionmaker[Db],
) -> None:
    r = _running_turn(factory)
    with transaction(factory) as db:
        new_turns.insert_turn(
            db,
            tenant_id=r.tenant_id,
            session_id=r.key.session_id,
            start_timeout_s=None,
            content="next",
        )
    before = _state(factory, r)
    closed = _close(factory, r, _reply(), gated=True)
    assert closed.owned and not closed.went and closed.turn is None and closed.session is None
    assert _state(factory, r) == before
    with transaction(factory) as db:  # ungated, as the caller then stores it (and promotes)
        closed = close_step(db, r.key, _reply(), RecordRows())
    assert closed.turn is not None and closed.session is not None
    assert closed.session.last_turn_seq > closed.turn.seq
    assert _state(factory, r)["turn"][0] == "done"


def test_the_end_cancels_a_claimed_step_and_adds_a_summarize_step_past_the_window(
    factory: sessionmaker[Db],
) -> None:
    r = _running_turn(factory, extra_steps=1)
    with transaction(factory) as db:  # the second step was claimed too (a parallel branch)
        second = db.execute(
            select(Step.id).where(Step.turn_id == r.key.turn_id, Step.step_no == 2)
        ).scalar_one()
    with transaction(factory) as db:
        assert (
            step_store.claim_model_step(db, second, lease_s=30, window=20, holder=TEST_HOLDER)
            is not None
        )
    closed = _close(factory, r, _reply(summarize_window=1), gated=True)
    assert closed.cut_off == (2, 1)
    assert closed.summarize_step_id is not None
    assert _state(factory, r)["steps"] == [
        (1, "model", "done"),
        (2, "model", "cancelled"),
        (3, "summarize", "pending"),
    ]


def _asking(n: int) -> Reply:
    calls = tuple(
        NewCall(uuid.uuid4(), uuid.uuid4(), 2 + i, f"call_{i}", "calculate", {"expression": "1+1"})
        for i in range(n)
    )
    return _reply(end=None, answer=None, summarize_window=None, calls=calls)


def test_a_reply_asking_for_tools_stores_its_calls_and_a_tool_step_each(
    factory: sessionmaker[Db],
) -> None:
    r = _running_turn(factory)
    reply = _asking(2)
    closed = _close(factory, r, reply)
    assert closed.went and closed.turn is not None and closed.turn.status == "running"
    state = _state(factory, r)
    assert state["turn"] == ("running", 7, 1, None)
    assert state["steps"] == [(1, "model", "done"), (2, "tool", "pending"), (3, "tool", "pending")]
    assert state["messages"][-1] == (2, "assistant", "the answer")
    with transaction(factory) as db:
        calls = db.execute(
            select(ToolCallRow.call_id)
            .where(ToolCallRow.step_id == r.key.step_id)
            .order_by(ToolCallRow.created_at)
        ).scalars()
        assert list(calls) == ["call_0", "call_1"]
        parent = db.get(Step, r.key.step_id)
        assert parent is not None and parent.open_calls == 2


def _claimed_tool_steps(factory: sessionmaker[Db], reply: Reply, r: Running) -> list[StepKey]:
    keys = []
    for call in reply.calls:
        with autocommit(factory) as db:
            got = step_store.claim_tool_step(db, call.step_id, lease_s=30, holder=TEST_HOLDER)
        assert got is not None
        keys.append(replace(r.key, step_id=call.step_id, attempt=got[0].attempt))
    return keys


def _done(call: NewCall, content: str = "2") -> ToolDone:
    return ToolDone(
        tool_call_id=call.tool_call_id,
        call_id=call.call_id,
        name=call.name,
        content=content,
        is_error=False,
        truncated=False,
        severity=ToolSeverity.OK,
        error_kind=None,
        latency_ms=3,
        audit_input={"arguments": dict(call.arguments)},
        audit_output={"chars": len(content)},
    )


def test_the_last_result_of_a_batch_adds_the_next_model_step(factory: sessionmaker[Db]) -> None:
    r = _running_turn(factory)
    reply = _asking(2)
    _close(factory, r, reply)
    first, second = _claimed_tool_steps(factory, reply, r)
    closed = _close(factory, r, _done(reply.calls[0]), key=first)
    assert closed.went and closed.next_step_id is None
    zombie = _close(factory, r, _done(reply.calls[1]), key=replace(second, attempt=9))
    assert not zombie.went and zombie.next_step_id is None
    closed = _close(factory, r, _done(reply.calls[1], "x"), key=second)
    assert closed.went and closed.next_step_id is not None
    state = _state(factory, r)
    assert state["steps"] == [
        (1, "model", "done"),
        (2, "tool", "done"),
        (3, "tool", "done"),
        (4, "model", "pending"),
    ]
    assert state["messages"][-2:] == [(3, "tool", "2"), (4, "tool", "x")]
    with transaction(factory) as db:
        nxt = db.get(Step, closed.next_step_id)
        assert nxt is not None and nxt.parent_step_id == r.key.step_id
        assert nxt.call_index == 1  # the session's second model call


@pytest.mark.parametrize("round_", range(5))
def test_results_that_finish_together_add_exactly_one_next_model_step(
    factory: sessionmaker[Db], round_: int
) -> None:
    r = _running_turn(factory)
    reply = _asking(4)
    _close(factory, r, reply)
    keys = _claimed_tool_steps(factory, reply, r)
    start = threading.Barrier(len(keys))
    nexts: list[uuid.UUID | None] = []

    def store(key: StepKey, call: NewCall) -> None:
        start.wait()
        nexts.append(_close(factory, r, _done(call), key=key).next_step_id)

    threads = [
        threading.Thread(target=store, args=kc) for kc in zip(keys, reply.calls, strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len([n for n in nexts if n is not None]) == 1
    model_steps = [s for s in _state(factory, r)["steps"] if s[1] == "model"]
    assert model_steps == [(1, "model", "done"), (6, "model", "pending")]


def test_a_release_gives_the_step_back_with_its_warnings_and_route(
    factory: sessionmaker[Db],
) -> None:
    r = _running_turn(factory)
    record = RecordRows(
        warnings=(Warning("budget_exhausted", "went local", 1),),
        route={"provider": "ollama", "reason": "local"},
    )
    closed = _close(factory, r, Release(r.key.attempt + 1, 0.0, {"code": "x"}), record=record)
    assert closed.went
    with transaction(factory) as db:
        step, turn = db.get(Step, r.key.step_id), db.get(Turn, r.key.turn_id)
        assert step is not None and turn is not None
        assert (step.status, step.attempt, step.error) == ("pending", 1, {"code": "x"})
        assert step.route == {"provider": "ollama", "reason": "local"}
        assert turn.warnings == [{"code": "budget_exhausted", "message": "went local", "step": 1}]


def test_a_spend_without_a_reservation_stores_its_usage_and_counts_it_once(
    factory: sessionmaker[Db],
) -> None:
    r = _running_turn(factory)
    day = datetime(2026, 11, 27, tzinfo=UTC)
    key = f"tenant:{r.tenant_id}"
    move = CounterMove(key, day, None, 0, 1234)
    spend = Spend(
        uuid.uuid4(), False, 0, "scripted", "m", 5000, 100, 1234, 7, 3, "call", day,
        {"used": (move,)},
    )  # fmt: skip
    for _ in range(2):  # a second writing of the same spend stores and counts nothing
        _close(factory, r, None, record=RecordRows(spends=(spend,)))
    with transaction(factory) as db:
        spent = db.execute(
            text("SELECT spent FROM budget_counters WHERE scope = :k"), {"k": key}
        ).scalar_one()
        used = db.execute(
            text("SELECT count(*), sum(cost_micros) FROM budget_reservations WHERE step_id = :s"),
            {"s": r.key.step_id},
        ).one()
    assert spent == 1234 and tuple(used) == (1, 1234)


def test_every_variant_is_small_enough_for_psycopg_to_cache_its_conversion() -> None:
    """Over psycopg's limits every execution re-parses the statement's text: the engine raises
    them (`store.db.make_engine`), and every variant stays under them."""
    texts = statement_texts()
    assert len(texts) >= 10
    for sql, params in texts:
        assert len(sql.encode()) <= _queries.MAX_CACHED_STATEMENT_LENGTH, sql[:200]
        assert params <= _queries.MAX_CACHED_STATEMENT_PARAMS
