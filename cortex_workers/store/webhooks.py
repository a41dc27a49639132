"""SQL of webhooks: subscriptions, the event outbox, deliveries (claimed with a lease and
fenced by their attempt count) and the log of attempts. See docs/webhooks.md."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import JsonValue
from sqlalchemy import and_, delete, func, insert, or_, select, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.sql import cast

from ..messages import JsonObject
from ..vocabulary import DeliveryStatus, WebhookEventType
from .db import Executor
from .webhook_tables import (
    Webhook,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEvent,
    webhook_attempts_table,
    webhook_deliveries_table,
    webhook_events_table,
    webhooks_table,
)

_d, _e, _w = webhook_deliveries_table.c, webhook_events_table.c, webhooks_table.c


def record_event(
    db: Executor, tenant_id: uuid.UUID, type: WebhookEventType, data: Mapping[str, JsonValue]
) -> uuid.UUID | None:
    """Record an event in the caller's transaction, with one pending delivery per webhook of
    the tenant that listens for `type`; None (nothing stored) when none does.

    Call it in the transaction of the change it announces, so the event exists exactly when
    the change does (an outbox). `data` holds ids and status, never content."""
    fn = func.cortex_record_event(tenant_id, type.value, cast(data, JSONB))
    return db.execute(select(fn)).scalar_one_or_none()


def create(
    db: Executor,
    *,
    tenant_id: uuid.UUID,
    url: str,
    events: Sequence[str],
    secret: str,
    shape: str = "cortex",
) -> Webhook:
    row = db.execute(
        insert(Webhook)
        .values(
            id=uuid.uuid4(),
            tenant_id=tenant_id,
            url=url,
            events=list(events),
            secret=secret,
            shape=shape,
        )
        .returning(Webhook)
    )
    return row.scalar_one()


def of_tenant(db: Executor, tenant_id: uuid.UUID) -> Sequence[Webhook]:
    query = select(Webhook).where(Webhook.tenant_id == tenant_id).order_by(Webhook.created_at)
    return db.execute(query).scalars().all()


def get(db: Executor, webhook_id: uuid.UUID, *, tenant_id: uuid.UUID) -> Webhook | None:
    query = select(Webhook).where(Webhook.id == webhook_id, Webhook.tenant_id == tenant_id)
    return db.execute(query).scalar_one_or_none()


def remove(db: Executor, webhook_id: uuid.UUID, *, tenant_id: uuid.UUID) -> bool:
    """Delete a webhook with its pending deliveries and their log; False if there was none."""
    gone = db.execute(
        delete(Webhook)
        .where(Webhook.id == webhook_id, Webhook.tenant_id == tenant_id)
        .returning(Webhook.id)
    )
    return gone.first() is not None


@dataclass(frozen=True, slots=True)
class DeliveryLog:
    """One delivery and its attempts, newest delivery first."""

    delivery: WebhookDelivery
    event: WebhookEvent
    attempts: list[WebhookAttempt]


def deliveries(db: Executor, webhook_id: uuid.UUID, *, limit: int) -> list[DeliveryLog]:
    rows = db.execute(
        select(WebhookDelivery, WebhookEvent)
        .join(WebhookEvent, WebhookEvent.id == WebhookDelivery.event_id)
        .where(WebhookDelivery.webhook_id == webhook_id)
        .order_by(WebhookDelivery.created_at.desc(), WebhookDelivery.id)
        .limit(limit)
    ).all()
    ids = [d.id for d, _ in rows]
    attempts: dict[uuid.UUID, list[WebhookAttempt]] = {i: [] for i in ids}
    for a in db.execute(
        select(WebhookAttempt)
        .where(WebhookAttempt.delivery_id.in_(ids))
        .order_by(WebhookAttempt.attempt)
    ).scalars():
        attempts[a.delivery_id].append(a)
    return [DeliveryLog(d, e, attempts[d.id]) for d, e in rows]


def take_due(db: Executor, *, limit: int, hold_s: float) -> list[tuple[uuid.UUID, int]]:
    """Pending deliveries that are due and held by no one: held for `hold_s` (the time their
    task has to claim them) and returned as (id, attempts) to publish."""
    due = (
        select(_d.id)
        .where(
            _d.status == DeliveryStatus.PENDING.value,
            _d.next_attempt_at <= func.now(),
            or_(_d.lease_until.is_(None), _d.lease_until < func.now()),
        )
        .order_by(_d.next_attempt_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    rows = db.execute(
        update(webhook_deliveries_table)
        .where(_d.id.in_(due.scalar_subquery()))
        .values(lease_until=func.now() + timedelta(seconds=hold_s))
        .returning(_d.id, _d.attempts)
    )
    return [(r.id, r.attempts) for r in rows]


@dataclass(frozen=True, slots=True)
class ClaimedDelivery:
    """A delivery this worker now attempts: `attempt` fences its record."""

    id: uuid.UUID
    attempt: int
    event_id: uuid.UUID
    type: str
    data: JsonObject
    event_at: datetime
    url: str
    secret: str
    shape: str = "cortex"


def claim(
    db: Executor, delivery_id: uuid.UUID, *, seen_attempts: int, lease_s: float
) -> ClaimedDelivery | None:
    """Start attempt `seen_attempts + 1`; None when another delivery of the task (a
    duplicate, or an older publish) already started it, or the delivery has ended."""
    row = db.execute(
        update(webhook_deliveries_table)
        .where(
            _d.id == delivery_id,
            _d.status == DeliveryStatus.PENDING.value,
            _d.attempts == seen_attempts,
            _e.id == _d.event_id,
            _w.id == _d.webhook_id,
        )
        .values(attempts=_d.attempts + 1, lease_until=func.now() + timedelta(seconds=lease_s))
        .returning(_d.id, _d.attempts, _e.id.label("event_id"), _e.type, _e.data)
        .returning(_e.created_at, _w.url, _w.secret, _w.shape)
    ).first()
    if row is None:
        return None
    return ClaimedDelivery(
        row.id,
        row.attempts,
        row.event_id,
        row.type,
        row.data,
        row.created_at,
        row.url,
        row.secret,
        row.shape,
    )


def record_attempt(
    db: Executor,
    claimed: ClaimedDelivery,
    *,
    status: DeliveryStatus,
    status_code: int | None,
    error: str | None,
    duration_ms: int,
    next_retry_at: datetime | None,
) -> bool:
    """Store an attempt's outcome, fenced by its attempt number; False if a newer attempt
    owns the delivery (this one's record is dropped)."""
    ended = status != DeliveryStatus.PENDING
    owned = db.execute(
        update(webhook_deliveries_table)
        .where(
            and_(
                _d.id == claimed.id,
                _d.attempts == claimed.attempt,
                _d.status == DeliveryStatus.PENDING.value,
            )
        )
        .values(
            status=status.value,
            lease_until=None,
            next_attempt_at=next_retry_at if next_retry_at is not None else _d.next_attempt_at,
            finished_at=func.now() if ended else None,
        )
        .returning(_d.id)
    ).first()
    if owned is None:
        return False
    db.execute(
        insert(webhook_attempts_table).values(
            delivery_id=claimed.id,
            attempt=claimed.attempt,
            status_code=status_code,
            error=error,
            duration_ms=duration_ms,
            next_retry_at=next_retry_at,
        )
    )
    return True
