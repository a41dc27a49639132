"""`POST /v1/responses` as a turn: the session it belongs to, its history, admission and
limits, the turn itself and its response row; published after the commit."""

from __future__ import annotations

import uuid
from typing import Any

from ...dispatch import publish
from ...runtime import Runtime
from ...store import openai_records
from ...store.db import transaction
from ...turns.guards.admission import admit_turn, replayed
from ...turns.submit import submit_turn
from ..images import checked_images
from ..ratelimit import take_turn
from . import ids
from .chains import add_history, known_calls, target_session
from .errors import OpenAIBadRequest
from .input_items import Turnable, to_turn
from .requests import ResponseCreate


def stored_request(body: ResponseCreate, turnable: Turnable) -> dict[str, Any]:
    """What the response echoes back, and its input items."""
    options = body.options()
    return {
        "model": body.model,
        "instructions": body.instructions,
        "metadata": body.metadata or {},
        "background": bool(body.background),
        "store": body.store is not False,
        "parallel_tool_calls": body.parallel_tool_calls is not False,
        "tool_choice": body.tool_choice or "auto",
        "user": body.user,
        "input": turnable.stored_input(),
        "tools": [t.model_dump(exclude_none=True) for t in body.function_tools()],
        "temperature": body.temperature,
        "max_output_tokens": body.max_output_tokens,
        "text": body.text.model_dump(by_alias=True, exclude_none=True) if body.text else None,
        "options": options.stored(),
    }


def _replay(rt: Runtime, tenant_id: uuid.UUID, turn_id: uuid.UUID, request: dict[str, Any]) -> str:
    with transaction(rt.db) as db:
        found = openai_records.response_and_turn(db, turn_id, tenant_id, deleted_too=True)
    if found is not None and found[0].request != request:
        raise OpenAIBadRequest(
            "this Idempotency-Key was already used with a different request; use a new key",
            param="Idempotency-Key",
            code="idempotency_key_reused",
        )
    if found is None:
        raise OpenAIBadRequest(
            "this Idempotency-Key names a turn that is not a response; use a new key",
            param="Idempotency-Key",
            code="idempotency_key_reused",
        )
    return ids.response_id(turn_id)


def create_response(
    rt: Runtime, tenant_id: uuid.UUID, body: ResponseCreate, idempotency_key: str | None
) -> str:
    """Store the response's turn (queued, started when its session is idle) and return its id."""
    body.check_supported()
    turnable = to_turn(body.input, known_calls(rt, tenant_id, body))
    for i, item in enumerate(turnable.history):
        checked_images(rt.settings, item.images or [], f"input[{i}] images")
    images = checked_images(rt.settings, turnable.images, "input images")
    request = stored_request(body, turnable)
    known = replayed(rt, tenant_id, idempotency_key)
    if known is not None:
        return _replay(rt, tenant_id, known.id, request)
    target = target_session(rt, tenant_id, body, turnable)
    take_turn(rt, tenant_id)
    admit_turn(
        rt,
        tenant_id=tenant_id,
        session_id=target.session_id,
        content=turnable.content,
        user=body.user,
    )
    add_history(rt, target.session_id, turnable.history)
    result = submit_turn(
        rt,
        tenant_id=tenant_id,
        session_id=target.session_id,
        content=turnable.content,
        idempotency_key=idempotency_key,
        user=body.user,
        options=body.options().model_copy(update={"images": images}).stored(),
    )
    with transaction(rt.db) as db:
        openai_records.insert_response(
            db,
            turn_id=result.turn.id,
            tenant_id=tenant_id,
            session_id=target.session_id,
            conversation=target.conversation,
            previous_response_id=target.previous,
            request=request,
        )
        if body.store is False:
            openai_records.delete_response(db, result.turn.id, tenant_id)
    publish(result.publish)
    return ids.response_id(result.turn.id)
