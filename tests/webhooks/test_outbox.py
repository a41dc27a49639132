"""Events are recorded in the transaction of the change they announce: none for a change that
rolls back, none when no webhook listens, one delivery per listening webhook otherwise."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, func, insert, select
from support import Api, Stack, wait_until

from cortex_workers.store import models
from cortex_workers.store.db import make_engine
from cortex_workers.store.webhook_tables import Webhook, WebhookDelivery, WebhookEvent
from cortex_workers.store.webhooks import record_event
from cortex_workers.vocabulary import WebhookEventType

pytestmark = pytest.mark.servers


@pytest.fixture(scope="module")
def engine(stack: Stack) -> Iterator[Engine]:
    engine = make_engine(stack.database_url, pool_size=1)
    yield engine
    engine.dispose()


def _tenant_with_webhook(engine: Engine, events: list[str]) -> uuid.UUID:
    with engine.begin() as conn:
        tenant = conn.execute(
            insert(models.Tenant)
            .values(id=uuid.uuid4(), name=f"outbox-{uuid.uuid4().hex[:8]}")
            .returning(models.Tenant.id)
        ).scalar_one()
        conn.execute(
            insert(Webhook).values(
                id=uuid.uuid4(),
                tenant_id=tenant,
                url="http://127.0.0.1:9/",
                events=events,
                secret="whsec_QUJD",
            )
        )
    return tenant


def _events(engine: Engine, tenant: uuid.UUID) -> int:
    with engine.connect() as conn:
        query = select(func.count()).where(WebhookEvent.tenant_id == tenant)
        return int(conn.execute(query).scalar_one())


def test_an_event_of_a_rolled_back_change_is_not_recorded(engine: Engine) -> None:
    tenant = _tenant_with_webhook(engine, ["budget.alert"])
    with engine.connect() as conn:
        data = {"budget_id": "b1", "status": "crossed"}
        assert record_event(conn, tenant, WebhookEventType.BUDGET_ALERT, data) is not None
        conn.rollback()
    assert _events(engine, tenant) == 0
    with engine.begin() as conn:
        event_id = record_event(conn, tenant, WebhookEventType.BUDGET_ALERT, data)
    assert _events(engine, tenant) == 1
    with engine.connect() as conn:
        query = select(WebhookDelivery.status).where(WebhookDelivery.event_id == event_id)
        assert conn.execute(query).scalars().all() == ["pending"]


def test_no_event_is_stored_when_no_webhook_listens_for_its_type(engine: Engine) -> None:
    tenant = _tenant_with_webhook(engine, ["turn.completed"])
    with engine.begin() as conn:
        data = {"task_id": "t", "status": "done"}
        assert record_event(conn, tenant, WebhookEventType.TASK_COMPLETED, data) is None
    assert _events(engine, tenant) == 0


def test_a_cancelled_turn_records_turn_cancelled(client: Api) -> None:
    body = {"url": "http://127.0.0.1:9/unreachable", "events": ["turn.cancelled"]}
    hook = client.http.post("/v1/webhooks", json=body).json()
    turn_id = client.submit(client.scripted_session({"text": "slow", "first_token_ms": 5000}))
    assert client.http.post(f"/v1/turns/{turn_id}/cancel").status_code == 200
    log = wait_until(
        lambda: client.http.get(f"/v1/webhooks/{hook['id']}/deliveries").json(),
        timeout=10,
        what="the event recorded",
    )
    (delivery,) = log
    assert delivery["event_type"] == "turn.cancelled"
    # the receiver refuses connections: the attempt is logged with its error and next retry
    attempts = wait_until(
        lambda: client.http.get(f"/v1/webhooks/{hook['id']}/deliveries").json()[0]["attempts"],
        timeout=10,
        what="a failed attempt",
    )
    assert attempts[0]["status_code"] is None and attempts[0]["error"]
    assert attempts[0]["next_retry_at"] is not None


def test_a_proposal_records_proposal_created_with_its_ids(client: Api, engine: Engine) -> None:
    body = {"url": "http://127.0.0.1:9/unreachable", "events": ["proposal.created"]}
    hook = client.http.post("/v1/webhooks", json=body).json()
    propose = {
        "name": "propose_action",
        "arguments": {"action": "restart", "product": "x", "rationale": "y"},
    }
    sid = client.scripted_session(
        {"text": "I suggest it.", "tool_calls": [propose]}, {"text": "ok"}
    )
    turn = client.wait_turn(client.submit(sid, "propose"))
    (proposal,) = client.http.get(f"/v1/sessions/{sid}/proposals").json()
    (delivery,) = client.http.get(f"/v1/webhooks/{hook['id']}/deliveries").json()
    assert delivery["event_type"] == "proposal.created" and turn["status"] == "done"
    with engine.connect() as conn:
        data = conn.execute(
            select(WebhookEvent.data)
            .join(WebhookDelivery, WebhookDelivery.event_id == WebhookEvent.id)
            .where(WebhookDelivery.id == uuid.UUID(delivery["id"]))
        ).scalar_one()
    assert data == {
        "proposal_id": proposal["id"],
        "session_id": sid,
        "turn_id": turn["id"],
        "status": "pending",
    }


def test_a_done_turn_records_one_turn_completed_and_a_failed_turn_one_turn_failed(
    client: Api, engine: Engine
) -> None:
    """The turn's end records its event once, in the transaction that ends it, with the
    turn's ids."""
    body = {"url": "http://127.0.0.1:9/unreachable", "events": ["turn.completed", "turn.failed"]}
    hook = client.http.post("/v1/webhooks", json=body).json()
    sid = client.scripted_session({"text": "fine"})
    done = client.submit(sid, "hi")
    assert client.wait_turn(done)["status"] == "done"
    failing = client.scripted_session(
        {"text": "never", "error": {"status": 400, "message": "bad request: no such model"}}
    )
    failed = client.submit(failing, "hi")
    assert client.wait_turn(failed)["status"] == "failed"

    def both() -> list[dict[str, object]] | None:
        log = client.http.get(f"/v1/webhooks/{hook['id']}/deliveries").json()
        return log if len(log) >= 2 else None

    log = wait_until(both, timeout=10, what="both events recorded")
    assert sorted(d["event_type"] for d in log) == ["turn.completed", "turn.failed"]
    with engine.connect() as conn:
        rows = conn.execute(
            select(WebhookEvent.type, WebhookEvent.data).where(
                WebhookEvent.data["turn_id"].astext.in_([done, failed])
            )
        ).all()
    by_type = {str(r.type): r.data for r in rows}
    assert len(rows) == 2
    assert by_type["turn.completed"]["turn_id"] == done
    assert by_type["turn.completed"]["session_id"] == sid
    assert by_type["turn.completed"]["status"] == "done"
    assert by_type["turn.failed"]["turn_id"] == failed
    assert by_type["turn.failed"]["error_code"]
