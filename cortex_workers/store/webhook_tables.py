"""Tables of webhooks: subscriptions, the event outbox, one delivery per (event, webhook) and
its attempts (migration 0010; docs/webhooks.md)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import cast

from sqlalchemy import (
    ARRAY,
    BigInteger,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from ..messages import JsonObject
from ..vocabulary import DeliveryStatus, WebhookEventType
from .models import Base, one_of


def events_check() -> CheckConstraint:
    """`events` holds only known event types (`ck_webhooks_events`)."""
    listed = ", ".join(f"'{t.value}'" for t in WebhookEventType)
    return CheckConstraint(
        f"events <@ ARRAY[{listed}]::varchar[] AND cardinality(events) > 0",
        name="ck_webhooks_events",
    )


class Webhook(Base):
    """A tenant's subscription: where to POST which events, and the secret that signs them."""

    __tablename__ = "webhooks"
    __table_args__ = (events_check(),)
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), index=True
    )
    url: Mapped[str] = mapped_column(Text)
    events: Mapped[list[str]] = mapped_column(ARRAY(String(32)))
    secret: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    shape: Mapped[str] = mapped_column(String(16), default="cortex", server_default="cortex")
    """`WebhookShape`: the events' form (migration 0017)."""


class WebhookEvent(Base):
    """One event of the outbox, recorded in the transaction of the change it announces."""

    __tablename__ = "webhook_events"
    __table_args__ = (one_of("type", WebhookEventType, table="webhook_events"),)
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    type: Mapped[WebhookEventType]
    data: Mapped[JsonObject]
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class WebhookDelivery(Base):
    """One event for one webhook: retried with backoff until 2xx or the retry period ends.
    `attempts` fences the writes of an attempt (a zombie cannot record over a newer one)."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        UniqueConstraint("event_id", "webhook_id"),
        Index(
            "ix_webhook_deliveries_due",
            "next_attempt_at",
            postgresql_where=text("status = 'pending'"),
        ),
        one_of("status", DeliveryStatus, table="webhook_deliveries"),
    )
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    event_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("webhook_events.id", ondelete="CASCADE"))
    webhook_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("webhooks.id", ondelete="CASCADE"), index=True
    )
    status: Mapped[DeliveryStatus] = mapped_column(default=DeliveryStatus.PENDING)
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    next_attempt_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class WebhookAttempt(Base):
    """What one attempt of a delivery got: status code or error, duration, next retry."""

    __tablename__ = "webhook_attempts"
    __table_args__ = (UniqueConstraint("delivery_id", "attempt"),)
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    delivery_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("webhook_deliveries.id", ondelete="CASCADE")
    )
    attempt: Mapped[int] = mapped_column(Integer)
    status_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    duration_ms: Mapped[int] = mapped_column(Integer)
    next_retry_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


webhooks_table = cast(Table, Webhook.__table__)
webhook_events_table = cast(Table, WebhookEvent.__table__)
webhook_deliveries_table = cast(Table, WebhookDelivery.__table__)
webhook_attempts_table = cast(Table, WebhookAttempt.__table__)
