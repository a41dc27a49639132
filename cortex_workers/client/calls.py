"""Every request the client makes, built once for the sync and the async client."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from .models import IfBusy, JsonObject, UsageGroup
from .transport import Call, Query


def _drop_none(body: Mapping[str, object]) -> dict[str, object]:
    """A request body without its unset fields (the API checks the rest)."""

    return {k: v for k, v in body.items() if v is not None}


def _query(**values: str | int | None) -> Query:
    """A query string's parameters, without the unset ones."""
    return {k: v for k, v in values.items() if v is not None}


def create_session(
    *,
    name: str | None,
    system_prompt: str | None,
    provider: str | None,
    model: str | None,
    tools: list[str] | None,
    metadata: JsonObject | None,
) -> Call:
    body = _drop_none(
        {
            "name": name,
            "system_prompt": system_prompt,
            "provider": provider,
            "model": model,
            "tools": tools,
            "metadata": metadata,
        }
    )
    return Call("POST", "/v1/sessions", json=body)


def get_session(session_id: str) -> Call:
    return Call("GET", f"/v1/sessions/{session_id}")


def messages(session_id: str, *, after: int | None, limit: int | None) -> Call:
    params = _query(after=after, limit=limit)
    return Call("GET", f"/v1/sessions/{session_id}/messages", params=params)


def create_turn(
    session_id: str, content: str, *, if_busy: IfBusy, idempotency_key: str | None
) -> Call:
    """With an `Idempotency-Key` always (a new one unless given): a resent POST returns the
    turn the first one created."""
    key = idempotency_key or f"cwc-{uuid.uuid4()}"
    return Call(
        "POST",
        f"/v1/sessions/{session_id}/turns",
        json={"content": content, "if_busy": if_busy},
        headers={"Idempotency-Key": key},
    )


def get_turn(turn_id: str) -> Call:
    return Call("GET", f"/v1/turns/{turn_id}")


def cancel_turn(turn_id: str) -> Call:
    return Call("POST", f"/v1/turns/{turn_id}/cancel")


def turn_events_path(turn_id: str) -> str:
    return f"/v1/turns/{turn_id}/events"


def get_proposal(proposal_id: str) -> Call:
    return Call("GET", f"/v1/proposals/{proposal_id}")


def decide_proposal(proposal_id: str, decision: str) -> Call:
    """Confirming (or rejecting) twice changes nothing: safe to resend."""
    return Call("POST", f"/v1/proposals/{proposal_id}/{decision}", resend_safe=True)


def create_job(
    instructions: str,
    input: Any,
    result_schema: JsonObject,
    *,
    provider: str | None,
    model: str | None,
    max_attempts: int,
    metadata: JsonObject | None,
) -> Call:
    body = _drop_none(
        {
            "instructions": instructions,
            "input": input,
            "result_schema": result_schema,
            "provider": provider,
            "model": model,
            "max_attempts": max_attempts,
            "metadata": metadata,
        }
    )
    return Call("POST", "/v1/jobs", json=body)


def get_job(job_id: str) -> Call:
    return Call("GET", f"/v1/jobs/{job_id}")


def create_batch(
    instructions: str,
    result_schema: JsonObject,
    inputs: list[Any],
    *,
    provider: str | None,
    model: str | None,
    max_attempts: int,
    metadata: JsonObject | None,
) -> Call:
    body = _drop_none(
        {
            "instructions": instructions,
            "result_schema": result_schema,
            "inputs": inputs,
            "provider": provider,
            "model": model,
            "max_attempts": max_attempts,
            "metadata": metadata,
        }
    )
    return Call("POST", "/v1/batches", json=body)


def get_batch(batch_id: str) -> Call:
    return Call("GET", f"/v1/batches/{batch_id}")


def batch_results(batch_id: str, *, offset: int | None, limit: int | None) -> Call:
    params = _query(offset=offset, limit=limit)
    return Call("GET", f"/v1/batches/{batch_id}/results", params=params)


def create_webhook(url: str, events: list[str]) -> Call:
    return Call("POST", "/v1/webhooks", json={"url": url, "events": events})


def list_webhooks() -> Call:
    return Call("GET", "/v1/webhooks")


def delete_webhook(webhook_id: str) -> Call:
    return Call("DELETE", f"/v1/webhooks/{webhook_id}")


def webhook_deliveries(webhook_id: str) -> Call:
    return Call("GET", f"/v1/webhooks/{webhook_id}/deliveries")


def get_budget() -> Call:
    return Call("GET", "/v1/budget")


def get_usage(*, start: str | None, end: str | None, group_by: UsageGroup | None) -> Call:
    params = _query(**{"from": start, "to": end, "group_by": group_by})
    return Call("GET", "/v1/usage", params=params)
