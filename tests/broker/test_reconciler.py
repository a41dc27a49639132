"""The reconciler: lost deliveries are re-published; stuck turns fail visibly."""

from __future__ import annotations

import logging
import uuid

import pytest
from sqlalchemy import update
from support import Api, stored_text, text_of, wait_until

from cortex_workers.runtime import get_runtime
from cortex_workers.store.db import transaction
from cortex_workers.store.models import Step, Turn

pytestmark = pytest.mark.servers


def _tenant_of(client: Api) -> uuid.UUID:
    from cortex_workers.store import tenants

    with transaction(get_runtime().db) as db:
        tenant = tenants.tenant_for_key(db, client.key or "")
    assert tenant is not None
    return tenant


def test_a_turn_whose_first_step_was_never_published_still_runs(client: Api) -> None:
    from cortex_workers.turns.submit import submit_turn

    sid = client.scripted_session({"text": "recovered"})
    # Commit without publishing, as if the broker had been unreachable at that moment.
    accepted = submit_turn(
        get_runtime(), tenant_id=_tenant_of(client), session_id=uuid.UUID(sid), content="hello"
    )
    assert accepted.publish  # a step was due for delivery, and nobody delivered it
    turn = client.wait_turn(str(accepted.turn.id), timeout=60)
    assert turn["status"] == "done" and turn["answer"] == "recovered"


def test_a_turn_past_its_deadline_fails_visibly(client: Api) -> None:
    sid = client.scripted_session({"text": " ".join(["slow"] * 200), "token_ms": 200})
    tid = client.submit(sid)
    wait_until(lambda: client.turn(tid)["status"] == "running", what="running")
    with transaction(get_runtime().db) as db:
        db.execute(update(Turn).where(Turn.id == uuid.UUID(tid)).values(deadline=Turn.started_at))
    events = client.turn_events(tid)
    assert events[-2].event == "error" and events[-2].data["code"] == "deadline_exceeded"
    assert events[-1].data["status"] == "failed"
    assert client.turn(tid)["error"]["code"] == "deadline_exceeded"
    # the model step was cut off mid-stream: its partial text is withdrawn
    assert events[-3].event == "step_restart"
    assert text_of(events) == "" == stored_text(client.messages(sid), tid)


def test_a_step_lost_too_many_times_fails_its_turn_and_fences_the_old_worker(client: Api) -> None:
    sid = client.scripted_session(
        {"text": " ".join(["slow"] * 200), "token_ms": 100}, {"text": "next turn"}
    )
    tid = client.submit(sid)
    client.turn_events(tid, limit=2)
    # The attempt cap (5) is reached and the lease has run out: the holder is presumed dead.
    with transaction(get_runtime().db) as db:
        db.execute(
            update(Step)
            .where(Step.turn_id == uuid.UUID(tid))
            .values(attempt=5, lease_until=Step.created_at)
        )
    turn = client.wait_turn(tid, timeout=30)
    assert turn["status"] == "failed" and turn["error"]["code"] == "attempts_exhausted"
    events = client.turn_events(tid)
    assert [e.event for e in events][-3:] == ["step_restart", "error", "done"]
    assert client.turn(tid)["steps"][0]["status"] == "failed"
    # the old worker, still streaming, was fenced out: nothing was stored for its step
    assert [m["role"] for m in client.messages(sid)] == ["user"]
    # and the session moves on
    nxt = client.submit(sid, "again")
    assert client.wait_turn(nxt)["answer"] == "next turn"


def test_the_reconciler_keeps_running_after_redis_loses_all_its_data(client: Api) -> None:
    from cortex_workers.turns.submit import submit_turn

    sid = client.scripted_session({"text": "still here"})
    rt = get_runtime()
    rt.redis.flushdb()  # a Redis restarted without persistence: schedule and lock are gone
    accepted = submit_turn(
        rt, tenant_id=_tenant_of(client), session_id=uuid.UUID(sid), content="hello"
    )  # committed, never published: only beat can save it
    turn = client.wait_turn(str(accepted.turn.id), timeout=60)
    assert turn["status"] == "done" and turn["answer"] == "still here"


def test_a_pass_that_found_nothing_logs_at_debug_and_one_that_acted_at_info(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Beat runs a pass every few seconds: the console shows only the passes that did
    something."""
    from cortex_workers.turns import reconcile

    with caplog.at_level(logging.DEBUG, logger=reconcile.log.name):
        reconcile._log(reconcile.Sweep())
        reconcile._log(reconcile.Sweep(expired_proposals=2))
    assert [r.levelno for r in caplog.records] == [logging.DEBUG, logging.INFO]
    assert "expired 2 proposals" in caplog.records[1].getMessage()
