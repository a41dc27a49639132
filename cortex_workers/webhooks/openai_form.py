"""Webhook events in OpenAI's form, for subscriptions of shape `openai`: the end of a
response's turn as `{"id", "object": "event", "type", "created_at", "data": {"id"}}`, which the
`openai` SDK's `client.webhooks.unwrap(body, headers, secret=…)` verifies and parses (the
signature is Standard Webhooks, as for our own form)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime

RESPONSE_EVENTS = {
    "turn.completed": "response.completed",
    "turn.failed": "response.failed",
    "turn.cancelled": "response.cancelled",
}
"""Our event → OpenAI's (a completed turn whose answer stopped at its output limit is
`response.incomplete`)."""


def openai_payload(
    *,
    event_id: uuid.UUID,
    type: str,
    timestamp: datetime,
    response_id: str,
    incomplete: bool = False,
) -> bytes | None:
    """The body in OpenAI's form, or None for an event that has none."""
    kind = RESPONSE_EVENTS.get(type)
    if kind is None:
        return None
    if kind == "response.completed" and incomplete:
        kind = "response.incomplete"
    doc = {
        "id": f"evt_{event_id.hex}",
        "object": "event",
        "type": kind,
        "created_at": int(timestamp.timestamp()),
        "data": {"id": response_id},
    }
    return json.dumps(doc, separators=(",", ":")).encode()
