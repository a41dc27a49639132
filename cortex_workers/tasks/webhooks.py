"""Queue `webhooks`: one attempt of a delivery per task; and the sweep (queue `maintenance`)
that publishes the due ones."""

from __future__ import annotations

import logging
import uuid

from celery import shared_task

from ..dispatch import publish_deliveries
from ..queues import DELIVER_WEBHOOK, DISPATCH_WEBHOOKS
from ..runtime import get_runtime
from ..turns.webhook_delivery import deliver as attempt
from ..turns.webhook_delivery import take_due

log = logging.getLogger(__name__)


@shared_task(name=DELIVER_WEBHOOK, ignore_result=True)
def deliver(delivery_id: str, attempts: int) -> None:
    attempt(uuid.UUID(delivery_id), attempts)


@shared_task(name=DISPATCH_WEBHOOKS, ignore_result=True, send_events=False)
def dispatch_webhooks() -> None:
    due = take_due(get_runtime())
    if due:
        log.info("dispatching %d webhook deliveries", len(due))
    publish_deliveries(due)
