"""Payloads and Standard Webhooks signatures (`webhook-id`, `webhook-timestamp`,
`webhook-signature: v1,<base64 HMAC-SHA256>`), made with the `standardwebhooks` package."""

from __future__ import annotations

import base64
import json
import secrets
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import JsonValue
from standardwebhooks.webhooks import Webhook

SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    """A signing secret: `whsec_` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def message_id(event_id: uuid.UUID) -> str:
    """The `webhook-id` of an event: the same on every attempt and for every webhook."""
    return f"msg_{event_id.hex}"


def payload(*, type: str, timestamp: datetime, data: Mapping[str, JsonValue]) -> bytes:
    """The body: `{"type", "timestamp", "data"}` as compact JSON."""
    doc = {"type": type, "timestamp": timestamp.astimezone(UTC).isoformat(), "data": data}
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


@dataclass(frozen=True, slots=True)
class SignedMessage:
    """What one attempt sends: the body and its headers."""

    body: bytes
    headers: dict[str, str]


def sign(secret: str, *, msg_id: str, body: bytes, now: datetime | None = None) -> SignedMessage:
    """The body with its Standard Webhooks headers, signed at `now` (each attempt signs anew:
    a receiver refuses timestamps older than five minutes)."""
    at = now or datetime.now(UTC)
    signature = Webhook(secret).sign(msg_id=msg_id, timestamp=at, data=body.decode())
    headers = {
        "content-type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
        "user-agent": "cortex-workers-webhooks",
    }
    return SignedMessage(body, headers)
