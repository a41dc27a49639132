"""SQL of the OpenAI-compatible API: response and conversation rows, and the session changes a
response may ask for (see `openai_models`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from pydantic import JsonValue
from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session as Db

from ..messages import JsonObject
from .models import Message, Session, Turn
from .openai_models import OpenAIConversation, OpenAIResponse
from .repo import storable_json, storable_text

ITEM_ROLES = ("user", "assistant")
"""The messages a conversation shows as items (tool traffic stays inside its turns)."""


def insert_response(
    db: Db,
    *,
    turn_id: uuid.UUID,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    conversation: bool,
    previous_response_id: uuid.UUID | None,
    request: JsonObject,
) -> None:
    """The response row of a new turn; a replayed Idempotency-Key finds it already there."""
    db.execute(
        insert(OpenAIResponse)
        .values(
            turn_id=turn_id,
            tenant_id=tenant_id,
            session_id=session_id,
            conversation=conversation,
            previous_response_id=previous_response_id,
            request=storable_json(request),
        )
        .on_conflict_do_nothing(index_elements=["turn_id"])
    )


def response_and_turn(
    db: Db, turn_id: uuid.UUID, tenant_id: uuid.UUID, *, deleted_too: bool = False
) -> tuple[OpenAIResponse, Turn] | None:
    """A response of the tenant that was not deleted (or any, `deleted_too`), with its turn."""
    query = (
        select(OpenAIResponse, Turn)
        .join(Turn, Turn.id == OpenAIResponse.turn_id)
        .where(OpenAIResponse.turn_id == turn_id, OpenAIResponse.tenant_id == tenant_id)
    )
    if not deleted_too:
        query = query.where(~OpenAIResponse.deleted)
    row = db.execute(query).one_or_none()
    return None if row is None else (row[0], row[1])


def response_warnings(db: Db, turn_id: uuid.UUID) -> list[JsonValue] | None:
    """The warnings of a turn created as a response (deleted or not); None for another turn."""
    found = db.execute(
        select(Turn.warnings)
        .join(OpenAIResponse, OpenAIResponse.turn_id == Turn.id)
        .where(Turn.id == turn_id)
    ).first()
    return None if found is None else list(found[0] or ())


def delete_response(db: Db, turn_id: uuid.UUID, tenant_id: uuid.UUID) -> bool:
    """Hide the response from the API (its turn stays, under the retention policy)."""
    done = db.execute(
        update(OpenAIResponse)
        .where(
            OpenAIResponse.turn_id == turn_id,
            OpenAIResponse.tenant_id == tenant_id,
            ~OpenAIResponse.deleted,
        )
        .values(deleted=True)
        .returning(OpenAIResponse.turn_id)
    ).first()
    return done is not None


def is_latest_turn(db: Db, turn: Turn) -> bool:
    """Whether no turn of the session came after `turn`."""
    last = db.execute(select(Session.last_turn_seq).where(Session.id == turn.session_id))
    return bool(last.scalar_one() == turn.seq)


def last_calls(db: Db, session_id: uuid.UUID, turn_id: uuid.UUID | None) -> dict[str, str]:
    """Call id → function name of the newest assistant message that made calls, of the turn
    (else of the session): the calls a client may answer with `function_call_output`."""
    query = select(Message.tool_calls).where(
        Message.session_id == session_id,
        Message.role == "assistant",
        Message.tool_calls.is_not(None),
        ~Message.rolled_back,
    )
    if turn_id is not None:
        query = query.where(Message.turn_id == turn_id)
    calls = db.execute(query.order_by(Message.seq.desc()).limit(1)).scalar_one_or_none()
    return {str(c["id"]): str(c["name"]) for c in calls or ()}


def retarget_session(
    db: Db,
    session_id: uuid.UUID,
    *,
    provider: str | None,
    model: str | None,
    system_prompt: str | None,
    script: list[JsonObject] | None,
    tools: list[str] | None = None,
) -> None:
    """Apply a response's model, instructions, tools and script to the session it continues:
    from this turn on. A new script takes over from the session's next model call."""
    session = db.execute(
        select(Session).where(Session.id == session_id).with_for_update()
    ).scalar_one()
    session.provider, session.model = provider, model
    if tools is not None:
        session.tools = tools
    if system_prompt is not None:
        session.system_prompt = storable_text(system_prompt)
    if script is not None:
        metadata = dict(session.metadata_ or {})
        prior = metadata.get("script")
        done: list[JsonValue] = (
            list(prior)[: session.model_calls] if isinstance(prior, list) else []
        )
        done += [{"text": ""}] * (session.model_calls - len(done))
        metadata["script"] = storable_json([*done, *script])
        session.metadata_ = metadata


def insert_conversation(
    db: Db, *, session_id: uuid.UUID, tenant_id: uuid.UUID, metadata: dict[str, str]
) -> OpenAIConversation:
    row = OpenAIConversation(
        session_id=session_id, tenant_id=tenant_id, metadata_=storable_json(metadata)
    )
    db.add(row)
    db.flush()
    db.refresh(row)
    return row


def set_conversation_metadata(row: OpenAIConversation, metadata: dict[str, str]) -> None:
    row.metadata_ = storable_json(metadata)


def conversation(db: Db, session_id: uuid.UUID, tenant_id: uuid.UUID) -> OpenAIConversation | None:
    return db.execute(
        select(OpenAIConversation).where(
            OpenAIConversation.session_id == session_id,
            OpenAIConversation.tenant_id == tenant_id,
        )
    ).scalar_one_or_none()


def delete_conversation(db: Db, session_id: uuid.UUID, tenant_id: uuid.UUID) -> bool:
    """The conversation is no longer addressable; its session and turns stay under the
    retention policy."""
    row = conversation(db, session_id, tenant_id)
    if row is None:
        return False
    db.delete(row)
    return True


def items(
    db: Db, session_id: uuid.UUID, *, after_seq: int | None, limit: int, descending: bool
) -> Sequence[Message]:
    """A conversation's items (its user and assistant messages that stand), paged by seq."""
    query = select(Message).where(
        Message.session_id == session_id,
        ~Message.rolled_back,
        Message.role.in_(ITEM_ROLES),
        Message.content != "",
    )
    if after_seq is not None:
        query = query.where(Message.seq < after_seq if descending else Message.seq > after_seq)
    order = Message.seq.desc() if descending else Message.seq
    return db.execute(query.order_by(order).limit(limit)).scalars().all()


def item(db: Db, session_id: uuid.UUID, message_id: uuid.UUID) -> Message | None:
    return db.execute(
        select(Message).where(
            Message.id == message_id,
            Message.session_id == session_id,
            ~Message.rolled_back,
            Message.role.in_(ITEM_ROLES),
        )
    ).scalar_one_or_none()


def delete_item(db: Db, message: Message) -> None:
    """An item leaves the conversation's history as a rolled-back message does."""
    message.rolled_back = True


def messages_at(db: Db, session_id: uuid.UUID, seqs: Sequence[int]) -> Sequence[Message]:
    if not seqs:
        return []
    query = select(Message).where(Message.session_id == session_id, Message.seq.in_(seqs))
    return db.execute(query.order_by(Message.seq)).scalars().all()
