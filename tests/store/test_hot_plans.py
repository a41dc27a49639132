"""Every hot statement stays off sequential scans of the big tables as history grows.

A database of its own gets 20k finished turns of synthetic history (bulk COPY, the growth
benchmark's loader: 20k turns and steps, 40k messages, 20k audit rows) and ANALYZE. Then each
hot path runs for real: a new turn, the claims (model step with its history window, tool
step, summarize), the statements that end steps (a reply asking for a tool, the tool's result,
the final reply), the lease renewal and hand-back, the reconciler's scans
(stale steps, overdue turns, sessions to promote, stuck proposals, dead workers), the queue
statistics and retention's batches. Every statement they sent is recorded at the driver and
EXPLAINed with its own parameters; no plan may read `turns`, `steps`, `messages` or `decisions`
with a Seq Scan.
"""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session as Db
from sqlalchemy.orm import sessionmaker
from support import TEST_HOLDER, Stack

import cortex_workers
from cortex_workers.store import (
    new_turns,
    queue_stats,
    replies,
    repo,
    retention,
    tenants,
    workers,
)
from cortex_workers.store import proposals as proposal_store
from cortex_workers.store import steps as step_store
from cortex_workers.store.db import autocommit, make_engine, make_sessionmaker, normalize_url
from cortex_workers.store.db import transaction as tx
from cortex_workers.store.step_commit import NewCall, Reply, StepKey, ToolDone, close_step
from cortex_workers.store.step_record_rows import RecordRows
from cortex_workers.vocabulary import ToolSeverity, TurnStatus
from scripts.bench.history import load_history

pytestmark = pytest.mark.servers

BIG = {"turns", "steps", "messages", "decisions"}
HISTORY = 20_000


def _libpq(url: str) -> str:
    return (
        make_url(normalize_url(url))
        .set(drivername="postgresql")
        .render_as_string(hide_password=False)
    )


@pytest.fixture(scope="module")
def factory(stack: Stack) -> Iterator[sessionmaker[Db]]:
    """A migrated database of its own with synthetic history; dropped afterwards."""
    server = make_url(normalize_url(stack.database_url))
    name = f"cortex_plans_{secrets.token_hex(4)}"
    with psycopg.connect(_libpq(stack.database_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = server.set(database=name).render_as_string(hide_password=False)
    cfg = Config()
    migrations = Path(cortex_workers.__file__).parent / "store" / "migrations"
    cfg.set_main_option("script_location", str(migrations))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    command.upgrade(cfg, "head")
    load_history(_libpq(url), HISTORY)
    engine = make_engine(url, pool_size=2)
    try:
        yield make_sessionmaker(engine)
    finally:
        engine.dispose()
        with psycopg.connect(_libpq(stack.database_url), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Recorder:
    """Every statement psycopg executes while recording, with its parameters."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[tuple[str, Any]] = []
        real = psycopg.Cursor.execute

        def execute(cur: Any, query: Any, params: Any = None, **kw: Any) -> Any:
            text = query if isinstance(query, str) else str(query)
            if text.lstrip().split(" ", 1)[0].upper() in (
                "SELECT",
                "INSERT",
                "UPDATE",
                "DELETE",
                "WITH",
            ):
                self.sent.append((text, params))
            return real(cur, query, params, **kw)

        monkeypatch.setattr(psycopg.Cursor, "execute", execute)


def _seq_scans(plan: dict[str, Any]) -> Iterator[str]:
    if plan.get("Node Type") == "Seq Scan" and plan.get("Relation Name") in BIG:
        yield str(plan["Relation Name"])
    for child in plan.get("Plans", []):
        yield from _seq_scans(child)


def _hot_paths(db_factory: sessionmaker[Db]) -> list[Callable[[], object]]:
    """Each hot path once, in order (a new turn, its claims, its reply, the sweeps)."""
    state: dict[str, Any] = {}

    def new_turn() -> None:
        with tx(db_factory) as db:
            tenant = tenants.ensure_tenant(db, f"plans-{uuid.uuid4().hex[:8]}")
            session = repo.insert_session(db, tenant.id)
            state["new"] = new_turns.insert_turn(
                db, tenant_id=tenant.id, session_id=session.id, start_timeout_s=60, content="u"
            )
            state["tenant"], state["session_id"] = tenant, session.id

    def claims() -> None:
        with autocommit(db_factory) as db:
            step = state["new"].first_step_id
            step_store.claim_model_step(db, step, lease_s=30, window=20, holder=TEST_HOLDER)
            step_store.claim_tool_step(db, uuid.uuid4(), lease_s=30, holder=TEST_HOLDER)
            step_store.claim_step(db, uuid.uuid4(), lease_s=30, holder=TEST_HOLDER)

    def reply() -> None:
        """A reply asking for a tool, the tool's result (which adds the next model step) and
        that step's final reply."""
        new = state["new"]
        usage = replies.Usage(
            provider="scripted",
            model="m",
            fallback_from=None,
            input_tokens=7,
            output_tokens=3,
            cache_read_tokens=0,
            cache_write_tokens=0,
            cost_usd=0.5,
            latency_ms=12,
        )
        audit = replies.ModelCallAudit(
            tenant_id=state["tenant"].id, name="scripted:m", input={}, output={}
        )
        key = StepKey(state["session_id"], new.id, new.first_step_id, 1, state["tenant"].id)
        call = NewCall(uuid.uuid4(), uuid.uuid4(), 2, "c", "calculate", {"expression": "1"})
        asking = Reply(
            usage, replies.Answer(id=uuid.uuid4(), content="a", tool_calls=None), audit, 1,
            calls=(call,),
        )  # fmt: skip
        with autocommit(db_factory) as db:
            assert close_step(db, key, asking, RecordRows()).went
            claimed = step_store.claim_tool_step(db, call.step_id, lease_s=30, holder=TEST_HOLDER)
            assert claimed is not None
            result = ToolDone(
                call.tool_call_id, "c", "calculate", "1", False, False, ToolSeverity.OK, None, 1,
                {}, {},
            )  # fmt: skip
            tool_key = replace(key, step_id=call.step_id, attempt=claimed[0].attempt)
            nxt = close_step(db, tool_key, result, RecordRows()).next_step_id
            assert nxt is not None
            claimed = step_store.claim_model_step(
                db, nxt, lease_s=30, window=20, holder=TEST_HOLDER
            )
            assert claimed is not None
            done = Reply(
                usage, replies.Answer(id=uuid.uuid4(), content="a", tool_calls=None), audit, 1,
                TurnStatus.DONE, "a", summarize_window=20,
            )  # fmt: skip
            final = replace(key, step_id=nxt, attempt=claimed[0].attempt)
            assert close_step(db, final, done, RecordRows(), gated=True).went

    def leases() -> None:
        with tx(db_factory) as db:
            held = [(state["new"].first_step_id, 1)]
            step_store.renew_leases(db, held, lease_s=30)
            workers.hand_back(db, [(uuid.uuid4(), 1)])

    def sweeps() -> None:
        with tx(db_factory) as db:
            step_store.stale_steps(db, republish_after_s=30, liveness_s=4)
            repo.overdue_turns(db)
            repo.sessions_needing_promotion(db)
            proposal_store.stuck_confirmed(db, older_than_s=30)
            workers.forget_dead(db, older_than_s=3600)
            queue_stats.queue_stats(db)

    def retain() -> None:
        with tx(db_factory) as db:
            cutoff = repo.now() - timedelta(days=30)
            tenant_id = state["tenant"].id
            retention.count_due(db, tenant_id, "t", cutoff)
            retention.delete_turns_batch(db, tenant_id, cutoff, batch=500)
            retention.delete_decisions_batch(db, tenant_id, cutoff, batch=500)

    return [new_turn, claims, leases, reply, sweeps, retain]


def test_no_hot_statement_scans_a_big_table(
    factory: sessionmaker[Db], monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder(monkeypatch)
    for path in _hot_paths(factory):
        path()
    monkeypatch.undo()
    assert len(recorder.sent) >= 15, recorder.sent
    scans: dict[str, list[str]] = {}
    with autocommit(factory) as db:
        raw = db.connection().connection.dbapi_connection
        assert raw is not None
        for sql, params in recorder.sent:
            row = raw.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchone()
            assert row is not None
            found = list(_seq_scans(row[0][0]["Plan"]))
            if found:
                scans[sql[:300]] = found
    assert not scans, json.dumps(scans, indent=1)
