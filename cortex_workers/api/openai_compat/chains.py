"""Which session a response is a turn of: a conversation, the session of the response it
continues (a fork of it when that response is not the session's latest), or a new hidden
session for a new chain. The response's model, instructions and script apply to that session
from this turn on."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ...errors import InvalidRequest, NotFound
from ...messages import JsonObject
from ...runtime import Runtime
from ...store import openai_records, repo
from ...store.db import transaction
from ...turns import sessions
from ...turns.forks import fork_session
from ...turns.guards.modes import AUTO
from ...turns.sessions import SessionSpec
from ..ratelimit import take_session
from . import ids
from .errors import OpenAIBadRequest
from .input_items import HistoryItem, Turnable
from .requests import ResponseCreate
from .views import load


@dataclass(frozen=True, slots=True)
class Target:
    session_id: uuid.UUID
    conversation: bool
    previous: uuid.UUID | None


def usable_models(rt: Runtime) -> dict[str, str]:
    """Model id → provider, for every available provider's models (`auto` routes)."""
    out: dict[str, str] = {}
    for info in rt.providers.describe():
        if not info.available:
            continue
        for model in (info.default_model, *info.models):
            if model and not any(c in model for c in "*?["):  # a pattern names no model
                out.setdefault(model, info.name)
    return out


def model_route(rt: Runtime, model: str) -> tuple[str | None, str]:
    """(provider, model) of a response's `model`; 404 `model_not_found` for one we lack."""
    if model == AUTO:
        return None, AUTO
    provider = usable_models(rt).get(model)
    if provider is None:  # a model of a provider's pattern (`gpt-*`)
        info = rt.providers.catalog.lookup(model)
        named = info.provider if info is not None else None
        if named is not None and rt.providers.unavailable(named) is None:
            provider = named
    if provider is None:
        raise NotFound(
            f"the model {model!r} does not exist here; see GET /v1/models", code="model_not_found"
        )
    return provider, model


def _instructions(body: ResponseCreate, turnable: Turnable) -> str | None:
    parts = [p for p in (body.instructions, *turnable.instructions) if p]
    return "\n\n".join(parts) if parts else None


def target_session(
    rt: Runtime, tenant_id: uuid.UUID, body: ResponseCreate, turnable: Turnable
) -> Target:
    provider, model = model_route(rt, body.model)
    server_tools = body.server_tools()
    try:
        sessions.check_tools(rt, server_tools)
    except InvalidRequest as exc:
        raise OpenAIBadRequest(exc.message, param="tools", code=exc.code) from None
    instructions, script = _instructions(body, turnable), body.script()
    if body.conversation_id is not None:
        session_id = ids.parse(body.conversation_id, ids.CONVERSATION, "conversation")
        target = Target(session_id, True, None)
        with transaction(rt.db) as db:
            if openai_records.conversation(db, session_id, tenant_id) is None:
                raise NotFound(f"conversation {body.conversation_id!r} not found")
    elif body.previous_response_id is not None:
        target = _continuing(rt, tenant_id, body.previous_response_id)
    else:
        take_session(rt, tenant_id)
        # a client that resends the whole chain (no previous_response_id) resends the answers
        # the script gave: the new session's script goes on after them
        answered = sum(1 for h in turnable.history if h.role == "assistant")
        script = script[answered:] if script else script
        metadata: JsonObject = {"script": [*script]} if script else {}
        spec = SessionSpec(
            name="response",
            system_prompt=instructions,
            provider=provider,
            model=model,
            tools=server_tools,
            metadata=metadata,
            user=body.user,
        )
        return Target(sessions.create_session(rt, tenant_id, spec).id, False, None)
    with transaction(rt.db) as db:
        openai_records.retarget_session(
            db,
            target.session_id,
            provider=provider,
            model=model,
            system_prompt=instructions,
            script=script,
            tools=server_tools,
        )
    return target


def _continuing(rt: Runtime, tenant_id: uuid.UUID, previous: str) -> Target:
    """The session of `previous`, or a fork of it at `previous` when a later turn exists."""
    with transaction(rt.db) as db:
        loaded = load(db, previous, tenant_id)
        turn, record = loaded.turn, loaded.record
        latest = openai_records.is_latest_turn(db, turn)
    if latest:
        return Target(record.session_id, record.conversation, turn.id)
    fork = fork_session(rt, tenant_id=tenant_id, session_id=record.session_id, at=turn.id)
    return Target(fork.id, False, turn.id)


def known_calls(rt: Runtime, tenant_id: uuid.UUID, body: ResponseCreate) -> dict[str, str]:
    """The function calls a `function_call_output` of this request may answer: those of the
    response it continues, or the conversation's latest ones (call id → name)."""
    if isinstance(body.input, str) or not any(
        getattr(i, "type", None) == "function_call_output" for i in body.input
    ):
        return {}
    with transaction(rt.db) as db:
        if body.previous_response_id is not None:
            loaded = load(db, body.previous_response_id, tenant_id)
            return openai_records.last_calls(db, loaded.record.session_id, loaded.turn.id)
        if body.conversation_id is not None:
            session_id = ids.parse(body.conversation_id, ids.CONVERSATION, "conversation")
            if openai_records.conversation(db, session_id, tenant_id) is None:
                raise NotFound(f"conversation {body.conversation_id!r} not found")
            return openai_records.last_calls(db, session_id, None)
    return {}


def add_history(rt: Runtime, session_id: uuid.UUID, history: list[HistoryItem]) -> None:
    """The messages of `input` before its last one (all of them when it ends with function
    call outputs), into the session's history."""
    if not history:
        return
    with transaction(rt.db) as db:
        for item in history:
            repo.insert_message(
                db,
                session_id=session_id,
                role=item.role,
                content=item.text,
                tool_calls=item.tool_calls,
                tool_call_id=item.tool_call_id,
                name=item.name,
                images=item.images,
            )
