"""`store_reply`: one statement that stores all of a model step's reply, or nothing of it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH, MAX_CACHED_STATEMENT_PARAMS
from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql.psycopg import dialect as psycopg_dialect
from sqlalchemy.orm import Session as Db
from sqlalchemy.orm import sessionmaker
from support import TEST_HOLDER, Stack

from cortex_workers.store import new_turns, replies, reply_statement, repo, tenants
from cortex_workers.store import steps as step_store
from cortex_workers.store.db import autocommit, make_engine, make_sessionmaker, transaction
from cortex_workers.store.models import Decision, Message, Session, Step, Turn
from cortex_workers.store.replies import Reply, store_reply
from cortex_workers.vocabulary import StepKind, TurnStatus


@pytest.fixture(scope="module")
def factory(stack: Stack) -> Iterator[sessionmaker[Db]]:
    engine = make_engine(stack.database_url, pool_size=2)
    yield make_sessionmaker(engine)
    engine.dispose()


@dataclass
class Running:
    session_id: uuid.UUID
    turn_id: uuid.UUID
    step_id: uuid.UUID
    attempt: int


def _running_turn(factory: sessionmaker[Db], *, extra_steps: int = 0) -> Running:
    """A session with one running turn whose first model step is claimed (attempt 1), and
    `extra_steps` more pending model steps of that turn."""
    with transaction(factory) as db:
        tenant = tenants.ensure_tenant(db, f"replies-{uuid.uuid4().hex[:8]}")
        session = repo.insert_session(db, tenant.id)
        new = new_turns.insert_turn(
            db, tenant_id=tenant.id, session_id=session.id, start_timeout_s=60, content="hi"
        )
        for i in range(extra_steps):
            step_store.insert_step(db, turn_id=new.id, step_no=2 + i, kind=StepKind.MODEL)
    with transaction(factory) as db:
        claimed = step_store.claim_model_step(
            db, new.first_step_id, lease_s=30, window=20, holder=TEST_HOLDER
        )
    assert claimed is not None
    return Running(session.id, new.id, new.first_step_id, claimed[0].attempt)


def _reply(r: Running, **kw: Any) -> Reply:
    fields: dict[str, Any] = {
        "session_id": r.session_id,
        "turn_id": r.turn_id,
        "step_id": r.step_id,
        "attempt": r.attempt,
        "input_tokens": 7,
        "output_tokens": 3,
        "cost": 0.5,
        "model_steps": 1,
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
        "end": TurnStatus.DONE,
        "answer": "the answer",
        "summarize_window": 20,
    }
    return Reply(**{**fields, **kw})


def _state(factory: sessionmaker[Db], r: Running) -> dict[str, Any]:
    with transaction(factory) as db:
        session = db.get(Session, r.session_id)
        turn = db.get(Turn, r.turn_id)
        assert session is not None and turn is not None
        steps = db.execute(
            select(Step.step_no, Step.kind, Step.status).where(Step.turn_id == r.turn_id)
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
                    select(Message).where(Message.session_id == r.session_id).order_by(Message.seq)
                ).scalars()
            ],
            "audits": db.execute(
                select(func.count()).where(Decision.step_id == r.step_id)
            ).scalar_one(),
        }


def test_a_final_reply_is_stored_whole_in_one_statement(factory: sessionmaker[Db]) -> None:
    r = _running_turn(factory, extra_steps=1)
    with autocommit(factory) as db:
        stored = store_reply(db, _reply(r), gated=True)
    assert stored.owned and stored.turn is not None and stored.session is not None
    assert (stored.turn.status, stored.turn.input_tokens, stored.turn.cost_usd) == ("done", 7, 0.5)
    assert stored.session.last_message_seq == 2
    assert stored.summarize_step_id is None  # two messages: far within the window
    assert stored.cut_off is None  # the other open step was never claimed
    assert _state(factory, r) == {
        "session": (2, 7, 3, 0.5),
        "turn": ("done", 7, 1, "the answer"),
        "steps": [(1, "model", "done"), (2, "model", "cancelled")],
        "messages": [(1, "user", "hi"), (2, "assistant", "the answer")],
        "audits": 1,
    }


def test_a_refused_reply_stores_nothing(factory: sessionmaker[Db]) -> None:
    r = _running_turn(factory)
    before = _state(factory, r)
    with autocommit(factory) as db:  # a newer attempt owns the step (we are a zombie)
        assert not store_reply(db, _reply(replace(r, attempt=r.attempt + 1))).owned
        assert not store_reply(db, _reply(replace(r, attempt=r.attempt + 1)), gated=True).owned
    assert _state(factory, r) == before
    with transaction(factory) as db:  # the turn was cancelled meanwhile
        repo.end_turn(db, r.turn_id, status=TurnStatus.CANCELLED)
    cancelled = _state(factory, r)
    with autocommit(factory) as db:
        assert not store_reply(db, _reply(r), gated=True).owned
        assert not store_reply(db, _reply(r)).owned
    assert _state(factory, r) == cancelled
    assert cancelled["session"] == before["session"]
    assert cancelled["messages"] == before["messages"] and cancelled["audits"] == 0


def test_a_gated_reply_stores_nothing_while_a_later_turn_waits(
    factory: sessionmaker[Db],
) -> None:
    r = _running_turn(factory)
    with transaction(factory) as db:
        session = db.get(Session, r.session_id)
        assert session is not None
        tenant_id = session.tenant_id
        new_turns.insert_turn(
            db, tenant_id=tenant_id, session_id=r.session_id, start_timeout_s=None, content="next"
        )
    before = _state(factory, r)
    with autocommit(factory) as db:
        stored = store_reply(db, _reply(r), gated=True)
    assert stored.owned and stored.turn is None and stored.session is None
    assert _state(factory, r) == before
    with transaction(factory) as db:  # ungated, as the caller then stores it (and promotes)
        stored = store_reply(db, _reply(r))
    assert stored.turn is not None and stored.session is not None
    assert stored.session.last_turn_seq > stored.turn.seq
    assert _state(factory, r)["turn"][0] == "done"


def test_the_end_cancels_a_claimed_step_and_adds_a_summarize_step_past_the_window(
    factory: sessionmaker[Db],
) -> None:
    r = _running_turn(factory, extra_steps=1)
    with transaction(factory) as db:  # the second step was claimed too (a parallel branch)
        second = db.execute(
            select(Step.id).where(Step.turn_id == r.turn_id, Step.step_no == 2)
        ).scalar_one()
    with transaction(factory) as db:
        assert (
            step_store.claim_model_step(db, second, lease_s=30, window=20, holder=TEST_HOLDER)
            is not None
        )
    with autocommit(factory) as db:
        stored = store_reply(db, _reply(r, summarize_window=1), gated=True)
    assert stored.cut_off == (2, 1)
    assert stored.summarize_step_id is not None
    assert _state(factory, r)["steps"] == [
        (1, "model", "done"),
        (2, "model", "cancelled"),
        (3, "summarize", "pending"),
    ]


def test_a_reply_asking_for_tools_leaves_the_turn_running(factory: sessionmaker[Db]) -> None:
    r = _running_turn(factory)
    with transaction(factory) as db:
        stored = store_reply(db, _reply(r, end=None, answer=None, summarize_window=None))
    assert stored.turn is not None and stored.turn.status == "running"
    state = _state(factory, r)
    assert state["turn"] == ("running", 7, 1, None)
    assert state["steps"] == [(1, "model", "done")]
    assert state["messages"][-1] == (2, "assistant", "the answer")


@pytest.mark.parametrize("key", sorted(reply_statement.STATEMENTS), ids=str)
def test_every_variant_is_small_enough_for_psycopg_to_cache_its_conversion(
    key: tuple[bool, bool, bool],
) -> None:
    """Over psycopg's limits, every execution re-parses the statement's text (about 0.2 ms
    of CPU for this one): each variant stays under them, as the driver will see it."""
    compiled = reply_statement.STATEMENTS[key].statement.compile(dialect=psycopg_dialect())
    assert len(str(compiled).encode()) <= MAX_CACHED_STATEMENT_LENGTH
    assert len(compiled.binds) <= MAX_CACHED_STATEMENT_PARAMS
