"""Retention deletes only what is due: finished turns (with their steps and messages) and audit
rows older than their tenant's days; never a live turn, a recent one, or a tenant kept forever."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import func, select, update
from support import Stack

from cortex_workers.runtime import Runtime
from cortex_workers.settings import RetentionSettings, Settings
from cortex_workers.store import new_turns, repo, tenants
from cortex_workers.store import steps as step_store
from cortex_workers.store.db import transaction
from cortex_workers.store.models import Decision, Message, Step, Turn
from cortex_workers.turns import retention
from cortex_workers.vocabulary import DecisionKind, TurnStatus

pytestmark = pytest.mark.servers


@pytest.fixture
def names(stack: Stack) -> dict[str, str]:
    tag = uuid.uuid4().hex[:8]
    return {k: f"ret-{k}-{tag}" for k in ("default", "longer", "forever")}


@pytest.fixture
def rt(stack: Stack, names: dict[str, str]) -> Iterator[Runtime]:
    settings = Settings(
        retention_days=30,
        retention_tenants={
            names["longer"]: RetentionSettings(days=365),
            names["forever"]: RetentionSettings(),
        },
        retention_batch=2,  # several batches
    )
    runtime = Runtime(settings)
    yield runtime
    runtime.close()


def _turn(rt: Runtime, tenant: str, *, age_days: float | None) -> uuid.UUID:
    """A turn with its user message, first step and an audit row; finished `age_days` ago
    (None: still running)."""
    with transaction(rt.db) as db:
        t = tenants.ensure_tenant(db, tenant)
        session = repo.insert_session(db, t.id)
        new = new_turns.insert_turn(
            db, tenant_id=t.id, session_id=session.id, start_timeout_s=60, content="u"
        )
        step_store.record_decision(
            db,
            tenant_id=t.id,
            session_id=session.id,
            turn_id=new.id,
            step_id=new.first_step_id,
            kind=DecisionKind.MODEL,
            name="m",
            attempt=1,
        )
        if age_days is None:  # running, its step held by a live call: no worker takes it
            db.execute(
                update(Step)
                .where(Step.id == new.first_step_id)
                .values(status="leased", attempt=1, lease_until=func.now() + timedelta(hours=1))
            )
        else:
            at = func.now() - timedelta(days=age_days)
            db.execute(
                update(Turn).where(Turn.id == new.id).values(status=TurnStatus.DONE, finished_at=at)
            )
            db.execute(update(Decision).where(Decision.turn_id == new.id).values(created_at=at))
        return new.id


def _left(rt: Runtime, turn_ids: list[uuid.UUID]) -> dict[str, int]:
    with transaction(rt.db) as db:

        def count(table: type[Step | Message | Decision]) -> int:
            query = select(func.count()).select_from(table).where(table.turn_id.in_(turn_ids))
            return int(db.execute(query).scalar_one())

        turns = select(func.count()).select_from(Turn).where(Turn.id.in_(turn_ids))
        return {
            "turns": int(db.execute(turns).scalar_one()),
            "steps": count(Step),
            "messages": count(Message),
            "decisions": count(Decision),
        }


def test_retention_deletes_only_what_is_due(rt: Runtime, names: dict[str, str]) -> None:
    due = [_turn(rt, names["default"], age_days=40) for _ in range(5)]
    kept = [
        _turn(rt, names["default"], age_days=10),
        _turn(rt, names["default"], age_days=None),  # running: never
        _turn(rt, names["longer"], age_days=40),
        _turn(rt, names["forever"], age_days=4000),
    ]
    dry = {d.tenant: d for d in retention.due(rt)}
    assert names["forever"] not in dry
    mine = dry[names["default"]]
    assert (mine.turns, mine.steps, mine.messages, mine.decisions) == (5, 5, 5, 5)
    assert dry[names["longer"]].total == 0
    assert _left(rt, due)["turns"] == 5  # a dry run deletes nothing

    done = {d.tenant: d for d in retention.apply_retention(rt)}
    assert (done[names["default"]].turns, done[names["default"]].decisions) == (5, 5)
    assert _left(rt, due) == {"turns": 0, "steps": 0, "messages": 0, "decisions": 0}
    assert _left(rt, kept) == {"turns": 4, "steps": 4, "messages": 4, "decisions": 4}
    assert retention.apply_retention(rt) and not retention.due(rt)[0].total
