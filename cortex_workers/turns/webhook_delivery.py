"""Delivering webhook events: at least once, signed, with exponential backoff.

Postgres is the queue of record: a delivery row is due (`next_attempt_at`), a sweep holds the
due ones briefly and publishes them, a worker claims one attempt with a lease (fenced by the
attempt count), sends it and records the outcome. A worker that dies mid-attempt leaves a
lease that runs out; the sweep then publishes the delivery again. Every attempt of one event
carries the same `webhook-id`, so a receiver deduplicates by it.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime, timedelta

from ..runtime import Runtime, get_runtime
from ..settings import Settings
from ..store import openai_records
from ..store import webhooks as store
from ..store.db import transaction
from ..vocabulary import DeliveryStatus, WebhookShape
from ..webhooks.openai_form import openai_payload
from ..webhooks.sending import SendResult, send
from ..webhooks.signing import message_id, payload, sign
from .options import CUT_OFF

log = logging.getLogger(__name__)

DUE_PER_SWEEP = 500
"""Deliveries one sweep publishes at most (the next sweep takes the rest)."""


def take_due(rt: Runtime) -> list[tuple[uuid.UUID, int]]:
    """Due deliveries to publish, each as (id, attempts so far); held until their task claims
    them or the hold runs out (a lost publish is published again)."""
    with transaction(rt.db) as db:
        return store.take_due(db, limit=DUE_PER_SWEEP, hold_s=_lease_s(rt.settings) * 2)


def _lease_s(settings: Settings) -> float:
    """An attempt's lease: its timeout, and time to record the outcome."""
    return settings.webhook_timeout_s + 5.0


def backoff_s(settings: Settings, attempt: int) -> float:
    """The wait after failed attempt `attempt` (1-based): base × 2^(attempt-1), capped."""
    exponent = min(attempt - 1, 40)
    return float(min(settings.webhook_backoff_base_s * 2**exponent, settings.webhook_backoff_max_s))


def next_retry(settings: Settings, *, attempt: int, event_at: datetime) -> datetime | None:
    """When to try again after a failed attempt, or None when that would be past the retry
    period of the event (the delivery is given up)."""
    at = datetime.now(UTC) + timedelta(seconds=backoff_s(settings, attempt))
    if at > event_at + timedelta(seconds=settings.webhook_retry_for_s):
        return None
    return at


def deliver(delivery_id: uuid.UUID, seen_attempts: int) -> None:
    """Make one attempt of a delivery, if it is still this publish's to make."""
    rt = get_runtime()
    settings = rt.settings
    with transaction(rt.db) as db:
        claimed = store.claim(
            db, delivery_id, seen_attempts=seen_attempts, lease_s=_lease_s(settings)
        )
    if claimed is None:
        return  # a duplicate delivery of the task, or the delivery ended
    body = _body(rt, claimed)
    if body is None:  # nothing to announce in this subscription's form: done, unsent
        result = SendResult(None, "not sent: no response in OpenAI's form", 0)
        status, retry_at = DeliveryStatus.SUCCEEDED, None
    else:
        message = sign(claimed.secret, msg_id=message_id(claimed.event_id), body=body)
        result = send(
            claimed.url,
            message,
            timeout_s=settings.webhook_timeout_s,
            allowed_private_hosts=settings.webhook_allowed_private_hosts,
        )
        status, retry_at = _outcome(settings, result, attempt=claimed.attempt, at=claimed.event_at)
    with transaction(rt.db) as db:
        kept = store.record_attempt(
            db,
            claimed,
            status=status,
            status_code=result.status_code,
            error=result.error,
            duration_ms=result.duration_ms,
            next_retry_at=retry_at,
        )
    if not kept:
        log.info("delivery %s attempt %d was superseded", delivery_id, claimed.attempt)


def _body(rt: Runtime, claimed: store.ClaimedDelivery) -> bytes | None:
    """The event in the subscription's form; None when that form has no such event (in
    OpenAI's form, only the end of a response's turn is one)."""
    if claimed.shape != WebhookShape.OPENAI:
        return payload(type=claimed.type, timestamp=claimed.event_at, data=claimed.data)
    turn_id = claimed.data.get("turn_id")
    if not isinstance(turn_id, str):
        return None
    with transaction(rt.db) as db:
        warnings = openai_records.response_warnings(db, uuid.UUID(turn_id))
    if warnings is None:
        return None
    cut = any(isinstance(w, dict) and w.get("code") == CUT_OFF for w in warnings)
    return openai_payload(
        event_id=claimed.event_id,
        type=claimed.type,
        timestamp=claimed.event_at,
        response_id=f"resp_{uuid.UUID(turn_id).hex}",
        incomplete=cut,
    )


def _outcome(
    settings: Settings, result: SendResult, *, attempt: int, at: datetime
) -> tuple[DeliveryStatus, datetime | None]:
    if result.delivered:
        return DeliveryStatus.SUCCEEDED, None
    retry_at = next_retry(settings, attempt=attempt, event_at=at)
    return (DeliveryStatus.PENDING if retry_at else DeliveryStatus.FAILED), retry_at
