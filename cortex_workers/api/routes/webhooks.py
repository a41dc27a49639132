"""Webhooks: subscribe a URL to events, list, delete, read the delivery log."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi.concurrency import run_in_threadpool

from ...errors import InvalidRequest, NotFound, QuotaExceeded
from ...store import webhooks as store
from ...store.db import transaction
from ...store.webhook_tables import Webhook
from ...vocabulary import DeliveryStatus, WebhookEventType, WebhookShape
from ...webhooks.sending import WebhookUrlRefused, check_url
from ...webhooks.signing import message_id, new_secret
from ..deps import RuntimeDep, TenantDep
from ..webhook_schemas import AttemptOut, DeliveryOut, WebhookCreated, WebhookIn, WebhookOut

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"])


def _out(row: Webhook) -> WebhookOut:
    events = [WebhookEventType(e) for e in row.events]
    return WebhookOut(
        id=row.id,
        url=row.url,
        events=events,
        created_at=row.created_at,
        shape=WebhookShape(row.shape),
    )


@router.post("", status_code=201, response_model=WebhookCreated)
async def create_webhook(body: WebhookIn, rt: RuntimeDep, tenant_id: TenantDep) -> WebhookCreated:
    """Subscribe `url` to `events`. The answer carries the signing `secret`, shown only here.
    Loopback and private hosts are refused (422 `webhook_url_blocked`) unless the operator
    lists them in `[webhooks] allowed_private_hosts`."""
    allowed = rt.settings.webhook_allowed_private_hosts
    try:
        await run_in_threadpool(check_url, body.url, allowed_private_hosts=allowed)
    except WebhookUrlRefused as exc:
        raise InvalidRequest(str(exc), code=exc.code, details={"url": body.url}) from None
    secret = new_secret()
    events = list(dict.fromkeys(e.value for e in body.events))

    def create() -> WebhookOut:
        with transaction(rt.db) as db:
            held = len(store.of_tenant(db, tenant_id))
            if held >= rt.settings.tenant_max_webhooks:
                raise QuotaExceeded(
                    f"this tenant has {held} webhooks, the most it may have; delete one first",
                    details={"quota": "webhooks", "limit": rt.settings.tenant_max_webhooks},
                )
            row = store.create(
                db,
                tenant_id=tenant_id,
                url=body.url,
                events=events,
                secret=secret,
                shape=body.shape.value,
            )
            return _out(row)

    out = await run_in_threadpool(create)
    return WebhookCreated(**out.model_dump(), secret=secret)


@router.get("", response_model=list[WebhookOut])
def list_webhooks(rt: RuntimeDep, tenant_id: TenantDep) -> list[WebhookOut]:
    """The tenant's webhooks, oldest first (without their secrets)."""
    with transaction(rt.db) as db:
        return [_out(w) for w in store.of_tenant(db, tenant_id)]


@router.delete("/{webhook_id}", status_code=204, response_class=Response)
def delete_webhook(webhook_id: uuid.UUID, rt: RuntimeDep, tenant_id: TenantDep) -> Response:
    """Stop sending to this webhook; its pending deliveries and log are dropped."""
    with transaction(rt.db) as db:
        if not store.remove(db, webhook_id, tenant_id=tenant_id):
            raise NotFound(f"webhook {webhook_id} not found")
    return Response(status_code=204)


@router.get("/{webhook_id}/deliveries", response_model=list[DeliveryOut])
def list_deliveries(
    webhook_id: uuid.UUID,
    rt: RuntimeDep,
    tenant_id: TenantDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> list[DeliveryOut]:
    """The latest deliveries, newest first, each with every attempt: status code, error,
    duration and when the next retry is due."""
    with transaction(rt.db) as db:
        if store.get(db, webhook_id, tenant_id=tenant_id) is None:
            raise NotFound(f"webhook {webhook_id} not found")
        logs = store.deliveries(db, webhook_id, limit=limit)
    return [
        DeliveryOut(
            id=log.delivery.id,
            event_id=message_id(log.event.id),
            event_type=WebhookEventType(log.event.type),
            status=DeliveryStatus(log.delivery.status),
            next_attempt_at=(
                log.delivery.next_attempt_at
                if log.delivery.status == DeliveryStatus.PENDING
                else None
            ),
            created_at=log.delivery.created_at,
            attempts=[
                AttemptOut(
                    attempt=a.attempt,
                    status_code=a.status_code,
                    error=a.error,
                    duration_ms=a.duration_ms,
                    next_retry_at=a.next_retry_at,
                    created_at=a.created_at,
                )
                for a in log.attempts
            ],
        )
        for log in logs
    ]
