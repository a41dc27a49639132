"""Request and response bodies of the webhook routes (docs/webhooks.md)."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from ..vocabulary import DeliveryStatus, WebhookEventType, WebhookShape


class WebhookIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str = Field(max_length=2000, description="http(s) URL that receives the events.")
    events: list[WebhookEventType] = Field(min_length=1, max_length=len(WebhookEventType))
    shape: WebhookShape = Field(
        default=WebhookShape.CORTEX,
        description="`openai`: the `turn.*` events of responses as OpenAI's `response.*` "
        "events (docs/openai-compatibility.md); other events are not sent.",
    )


class WebhookOut(BaseModel):
    id: uuid.UUID
    url: str
    events: list[WebhookEventType]
    created_at: datetime
    shape: WebhookShape = WebhookShape.CORTEX


class WebhookCreated(WebhookOut):
    secret: str = Field(description="The signing secret (`whsec_…`): shown this once only.")


class AttemptOut(BaseModel):
    attempt: int
    status_code: int | None
    error: str | None
    duration_ms: int
    next_retry_at: datetime | None
    """When the next attempt is due; null after the last one."""
    created_at: datetime


class DeliveryOut(BaseModel):
    id: uuid.UUID
    event_id: str
    """The `webhook-id` every attempt carried."""
    event_type: WebhookEventType
    status: DeliveryStatus
    next_attempt_at: datetime | None
    created_at: datetime
    attempts: list[AttemptOut]
