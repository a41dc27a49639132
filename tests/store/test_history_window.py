"""The history a model step reads with its claim: the last `window` messages after the
session's summary, and always the whole of the current turn."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, update
from sqlalchemy.orm import Session as Db
from sqlalchemy.orm import sessionmaker
from support import TEST_HOLDER, Stack

from cortex_workers.store import claims, new_turns, repo, tenants
from cortex_workers.store.db import autocommit, make_engine, make_sessionmaker, transaction
from cortex_workers.store.models import Session, Step

pytestmark = pytest.mark.servers


@pytest.fixture(scope="module")
def factory(stack: Stack) -> Iterator[sessionmaker[Db]]:
    engine = make_engine(stack.database_url, pool_size=2)
    yield make_sessionmaker(engine)
    engine.dispose()


def _seen(
    factory: sessionmaker[Db],
    *,
    earlier: int,
    window: int,
    summary_upto: int = 0,
    turn_messages: int = 0,
) -> list[str]:
    """Contents the first model step of a new turn sees, after `earlier` messages `m1…`; the
    turn itself holds its user message `u` and `turn_messages` more (`t1…`)."""
    with transaction(factory) as db:
        tenant = tenants.ensure_tenant(db, f"window-{uuid.uuid4().hex[:8]}")
        session = repo.insert_session(db, tenant.id)
        for i in range(earlier):
            role = "user" if i % 2 == 0 else "assistant"
            repo.insert_message(db, session_id=session.id, role=role, content=f"m{i + 1}")
        new = new_turns.insert_turn(
            db, tenant_id=tenant.id, session_id=session.id, start_timeout_s=60, content="u"
        )
        for i in range(turn_messages):
            repo.insert_message(
                db, session_id=session.id, role="assistant", content=f"t{i + 1}", turn_id=new.id
            )
        db.execute(
            update(Session).where(Session.id == session.id).values(summary_upto_seq=summary_upto)
        )
        # as if published just now and for a while: the reconciler of the suite's running stack
        # leaves it to this claim however long the machine stalls in between
        db.execute(
            update(Step)
            .where(Step.id == new.first_step_id)
            .values(published_at=func.now() + timedelta(hours=1))
        )
    with autocommit(factory) as db:
        claimed = claims.claim_model_step(
            db, new.first_step_id, lease_s=30, window=window, holder=TEST_HOLDER
        )
    assert claimed is not None
    return [m["content"] for m in claimed[1].history]


def test_the_last_window_messages_oldest_first(factory: sessionmaker[Db]) -> None:
    assert _seen(factory, earlier=10, window=4) == ["m8", "m9", "m10", "u"]
    assert _seen(factory, earlier=2, window=4) == ["m1", "m2", "u"]


def test_nothing_the_summary_already_holds(factory: sessionmaker[Db]) -> None:
    assert _seen(factory, earlier=10, window=6, summary_upto=8) == ["m9", "m10", "u"]


def test_always_the_whole_turn_even_past_the_window(factory: sessionmaker[Db]) -> None:
    assert _seen(factory, earlier=4, window=2, turn_messages=3) == ["u", "t1", "t2", "t3"]


def test_the_view_without_a_claim_reads_the_same(factory: sessionmaker[Db]) -> None:
    with transaction(factory) as db:
        tenant = tenants.ensure_tenant(db, f"window-{uuid.uuid4().hex[:8]}")
        session = repo.insert_session(db, tenant.id)
        repo.insert_message(db, session_id=session.id, role="user", content="m1")
        new = new_turns.insert_turn(
            db, tenant_id=tenant.id, session_id=session.id, start_timeout_s=60, content="u"
        )
    with transaction(factory) as db:
        view = claims.model_step_view(db, new.first_step_id, window=1)
    assert [m["content"] for m in view.history] == ["u"]
    assert view.history[0] == {
        "role": "user",
        "content": "u",
        "tool_calls": None,
        "tool_call_id": None,
        "name": None,
        "is_error": False,
        "images": None,
    }


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def test_the_claim_reads_its_own_session_not_every_turn(factory: sessionmaker[Db]) -> None:
    """The claim's cost does not grow with the database: finding the turn's user message is
    an index lookup of that turn, not a scan of every turn's user message."""
    with transaction(factory) as db:
        tenant = tenants.ensure_tenant(db, f"window-{uuid.uuid4().hex[:8]}")
        for _ in range(30):  # other sessions' turns, each with its user message
            other = repo.insert_session(db, tenant.id)
            new_turns.insert_turn(
                db, tenant_id=tenant.id, session_id=other.id, start_timeout_s=60, content="o"
            )
        session = repo.insert_session(db, tenant.id)
        new = new_turns.insert_turn(
            db, tenant_id=tenant.id, session_id=session.id, start_timeout_s=60, content="u"
        )
    params = claims.ClaimWithViewParams(
        step_id=new.first_step_id,
        lease=timedelta(seconds=30),
        liveness=timedelta(seconds=TEST_HOLDER.liveness_s),
        worker=TEST_HOLDER.worker,
        window=8,
        tool_limits=True,  # the optional reads on: they too read this turn, not every one
        recoveries=True,
    )
    with transaction(factory) as db:  # EXPLAIN ANALYZE runs the claim: rolled back after
        conn = db.connection()
        form = claims._CLAIM_WITH_VIEW._compile(conn.dialect)
        raw = conn.connection.dbapi_connection
        assert raw is not None
        explained = raw.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + form.sql, form.bind(params))
        plan = explained.fetchone()
        db.rollback()
    assert plan is not None
    read = {
        f"{node['Node Type']} {node.get('Index Name', '')}": node["Actual Rows"]
        * node["Actual Loops"]
        for node in _nodes(plan[0][0]["Plan"])
    }
    assert max(read.values()) <= 2, read
