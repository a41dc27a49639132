"""`start_turn_if_idle`: a turn posted to an idle session starts in one statement; anything
else (a busy session, or one that changed while the statement waited) stores nothing."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session as Db
from sqlalchemy.orm import sessionmaker
from support import Stack

from cortex_workers.store import new_turns, repo, tenants
from cortex_workers.store.db import autocommit, make_engine, make_sessionmaker, transaction
from cortex_workers.store.models import Message, Step, Turn
from cortex_workers.vocabulary import TurnStatus

pytestmark = pytest.mark.servers


@pytest.fixture(scope="module")
def factory(stack: Stack) -> Iterator[sessionmaker[Db]]:
    engine = make_engine(stack.database_url, pool_size=4)
    yield make_sessionmaker(engine)
    engine.dispose()


def _session(factory: sessionmaker[Db]) -> tuple[uuid.UUID, uuid.UUID]:
    with transaction(factory) as db:
        tenant = tenants.ensure_tenant(db, f"idle-{uuid.uuid4().hex[:8]}")
        return tenant.id, repo.insert_session(db, tenant.id).id


def _start(
    factory: sessionmaker[Db], tenant_id: uuid.UUID, session_id: uuid.UUID
) -> new_turns.StartOutcome:
    with autocommit(factory) as db:
        return new_turns.start_turn_if_idle(
            db, tenant_id=tenant_id, session_id=session_id, timeout_s=60, content="go"
        )


def _turns(factory: sessionmaker[Db], session_id: uuid.UUID) -> list[tuple[int, TurnStatus]]:
    with transaction(factory) as db:
        rows = db.execute(
            select(Turn.seq, Turn.status).where(Turn.session_id == session_id).order_by(Turn.seq)
        ).all()
        return [(r.seq, r.status) for r in rows]


def test_an_idle_session_starts_the_turn_with_its_message_and_first_step(
    factory: sessionmaker[Db],
) -> None:
    tenant_id, session_id = _session(factory)
    started = _start(factory, tenant_id, session_id)
    assert isinstance(started, new_turns.Started)
    new = started.turn
    assert (new.seq, new.status) == (1, TurnStatus.RUNNING)
    with transaction(factory) as db:
        turn = db.get(Turn, new.id)
        assert turn is not None and turn.started_at is not None and turn.deadline is not None
        message = db.execute(select(Message).where(Message.turn_id == new.id)).scalar_one()
        assert (message.seq, message.role, message.content) == (1, "user", "go")
        step = db.get(Step, new.first_step_id)
        assert step is not None and (step.step_no, step.kind, step.status) == (
            1,
            "model",
            "pending",
        )


def test_a_busy_session_or_another_tenants_stores_nothing(factory: sessionmaker[Db]) -> None:
    tenant_id, session_id = _session(factory)
    assert isinstance(_start(factory, tenant_id, session_id), new_turns.Started)
    busy = _start(factory, tenant_id, session_id)  # the first turn still runs
    assert busy == new_turns.SessionBusy()
    assert _start(factory, uuid.uuid4(), session_id) == new_turns.NoSuchSession()
    assert _start(factory, tenant_id, uuid.uuid4()) == new_turns.NoSuchSession()
    assert _turns(factory, session_id) == [(1, "running")]


def _wait_until_blocked(factory: sessionmaker[Db], thread: threading.Thread) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and thread.is_alive():
        with transaction(factory) as db:
            waiting = db.execute(
                text(
                    "select count(*) from pg_stat_activity where wait_event_type = 'Lock' "
                    "and query like '%locked%'"
                )
            ).scalar_one()
        if waiting:
            return
        time.sleep(0.01)
    raise AssertionError("the statement never waited for the session lock")


@contextmanager
def _start_while_locked(
    factory: sessionmaker[Db], tenant_id: uuid.UUID, session_id: uuid.UUID
) -> Iterator[tuple[Db, list[Any]]]:
    """Hold the session's lock in a transaction while another thread's `start_turn_if_idle`
    waits for it; yields that transaction and the list that receives the other's result once
    the transaction has committed."""
    got: list[Any] = []
    with transaction(factory) as db:
        assert new_turns.lock_session(db, session_id, tenant_id)
        waiter = threading.Thread(target=lambda: got.append(_start(factory, tenant_id, session_id)))
        waiter.start()
        _wait_until_blocked(factory, waiter)
        yield db, got
    waiter.join(10)


def test_a_turn_stored_while_the_statement_waited_for_the_lock_is_seen(
    factory: sessionmaker[Db],
) -> None:
    """Its snapshot predates the other turn, but the session's `last_turn_seq` moved."""
    tenant_id, session_id = _session(factory)
    with _start_while_locked(factory, tenant_id, session_id) as (db, got):
        new_turns.insert_turn(
            db, tenant_id=tenant_id, session_id=session_id, start_timeout_s=60, content="first"
        )
    assert got == [new_turns.SessionBusy()]
    assert _turns(factory, session_id) == [(1, "running")]


def test_a_turn_that_ended_while_the_statement_waited_no_longer_counts(
    factory: sessionmaker[Db],
) -> None:
    tenant_id, session_id = _session(factory)
    first = _start(factory, tenant_id, session_id)
    assert isinstance(first, new_turns.Started)
    with _start_while_locked(factory, tenant_id, session_id) as (db, got):
        assert repo.end_turn(db, first.turn.id, status=TurnStatus.DONE) is not None
    assert len(got) == 1 and isinstance(got[0], new_turns.Started)
    assert _turns(factory, session_id) == [(1, "done"), (2, "running")]
