"""`/v1/conversations`: a conversation is a session; its items are the session's user and
assistant messages, and a response in it is one of its turns."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from openai.types.conversations import Conversation, ConversationDeletedResource
from openai.types.conversations.message import Message as ItemMessage
from openai.types.responses import ResponseInputImage, ResponseInputText, ResponseOutputText
from sqlalchemy.orm import Session as Db

from ...errors import NotFound
from ...runtime import Runtime
from ...store import openai_records, repo
from ...store.db import transaction
from ...store.models import Message
from ...store.openai_models import OpenAIConversation
from ...turns import sessions
from ...turns.sessions import SessionSpec
from ..deps import RuntimeDep, TenantDep
from ..images import checked_images
from ..ratelimit import take_session
from . import ids
from .errors import OpenAIBadRequest
from .input_items import MessageItem, part_images, part_text
from .requests import ConversationCreate, ConversationUpdate, ItemsCreate
from .views import list_page

router = APIRouter(prefix="/v1/conversations", tags=["openai"])
Limit = Annotated[int, Query(ge=1, le=100)]
Order = Annotated[Literal["asc", "desc"], Query()]


def conversation_out(row: OpenAIConversation) -> JSONResponse:
    out = Conversation(
        id=ids.conversation_id(row.session_id),
        object="conversation",
        created_at=int(row.created_at.timestamp()),
        metadata=row.metadata_ or {},
    )
    return JSONResponse(out.model_dump(mode="json"))


def item_out(m: Message) -> ItemMessage:
    parts: list[ResponseInputText | ResponseOutputText | ResponseInputImage] = []
    if m.role == "assistant":
        parts.append(ResponseOutputText(type="output_text", text=m.content, annotations=[]))
    else:
        if m.content or not m.images:
            parts.append(ResponseInputText(type="input_text", text=m.content))
        parts += [
            ResponseInputImage(type="input_image", image_url=str(url), detail="auto")
            for url in m.images or ()
        ]
    return ItemMessage(
        id=ids.item_id(m.id),
        type="message",
        role="assistant" if m.role == "assistant" else "user",
        status="completed",
        content=parts,  # type: ignore[arg-type]
    )


def _require(db: Db, conversation_id: str, tenant_id: uuid.UUID) -> OpenAIConversation:
    session_id = ids.parse(conversation_id, ids.CONVERSATION, "conversation")
    row = openai_records.conversation(db, session_id, tenant_id)
    if row is None:
        raise NotFound(f"conversation {conversation_id!r} not found", code="conversation_not_found")
    return row


def _add_items(
    rt: Runtime, db: Db, session_id: uuid.UUID, items: list[MessageItem]
) -> list[Message]:
    added: list[int] = []
    for i, item in enumerate(items):
        if item.role not in ("user", "assistant"):
            raise OpenAIBadRequest(
                "conversation items are user or assistant messages", param=f"items[{i}].role"
            )
        text = part_text(item, f"items[{i}]")
        images = checked_images(rt.settings, part_images(item, f"items[{i}]"), f"items[{i}]")
        seq = repo.insert_message(
            db, session_id=session_id, role=item.role, content=text, images=list(images) or None
        )
        added += [seq] if seq is not None else []
    return list(openai_records.messages_at(db, session_id, added))


def _create(rt: Runtime, tenant_id: uuid.UUID, body: ConversationCreate) -> OpenAIConversation:
    take_session(rt, tenant_id)
    session = sessions.create_session(rt, tenant_id, SessionSpec(name="conversation", tools=[]))
    with transaction(rt.db) as db:
        _add_items(rt, db, session.id, body.items or [])
        return openai_records.insert_conversation(
            db, session_id=session.id, tenant_id=tenant_id, metadata=body.metadata or {}
        )


@router.post("")
async def create(body: ConversationCreate, rt: RuntimeDep, tenant_id: TenantDep) -> object:
    """A new conversation (a session), with its first `items` and `metadata`."""
    return conversation_out(await run_in_threadpool(_create, rt, tenant_id, body))


def _get(rt: Runtime, tenant_id: uuid.UUID, conversation_id: str) -> OpenAIConversation:
    with transaction(rt.db) as db:
        return _require(db, conversation_id, tenant_id)


@router.get("/{conversation_id}")
async def retrieve(conversation_id: str, rt: RuntimeDep, tenant_id: TenantDep) -> object:
    return conversation_out(await run_in_threadpool(_get, rt, tenant_id, conversation_id))


def _update(
    rt: Runtime, tenant_id: uuid.UUID, conversation_id: str, body: ConversationUpdate
) -> OpenAIConversation:
    with transaction(rt.db) as db:
        row = _require(db, conversation_id, tenant_id)
        openai_records.set_conversation_metadata(row, body.metadata)
        db.flush()
        return row


@router.post("/{conversation_id}")
async def update(
    conversation_id: str, body: ConversationUpdate, rt: RuntimeDep, tenant_id: TenantDep
) -> object:
    """Replace the conversation's `metadata`."""
    return conversation_out(await run_in_threadpool(_update, rt, tenant_id, conversation_id, body))


def _delete(rt: Runtime, tenant_id: uuid.UUID, conversation_id: str) -> None:
    with transaction(rt.db) as db:
        row = _require(db, conversation_id, tenant_id)
        openai_records.delete_conversation(db, row.session_id, tenant_id)


@router.delete("/{conversation_id}")
async def delete(conversation_id: str, rt: RuntimeDep, tenant_id: TenantDep) -> object:
    """The conversation is no longer addressable (its session stays, under retention)."""
    await run_in_threadpool(_delete, rt, tenant_id, conversation_id)
    out = ConversationDeletedResource(
        id=conversation_id, deleted=True, object="conversation.deleted"
    )
    return JSONResponse(out.model_dump(mode="json"))


def _list_page(items: list[ItemMessage], *, limit: int) -> JSONResponse:
    return list_page(items[:limit], has_more=len(items) > limit)


def _items(
    rt: Runtime,
    tenant_id: uuid.UUID,
    conversation_id: str,
    after: str | None,
    limit: int,
    order: str,
) -> list[ItemMessage]:
    with transaction(rt.db) as db:
        row = _require(db, conversation_id, tenant_id)
        after_seq = None
        if after is not None:
            at = openai_records.item(db, row.session_id, ids.parse(after, ids.MESSAGE, "item"))
            if at is None:
                raise OpenAIBadRequest(f"no item {after!r} in this conversation", param="after")
            after_seq = at.seq
        rows = openai_records.items(
            db, row.session_id, after_seq=after_seq, limit=limit + 1, descending=order == "desc"
        )
        return [item_out(m) for m in rows]


@router.get("/{conversation_id}/items")
async def list_items(
    conversation_id: str,
    rt: RuntimeDep,
    tenant_id: TenantDep,
    after: str | None = None,
    limit: Limit = 20,
    order: Order = "desc",
) -> object:
    """The conversation's items, paged as OpenAI pages them."""
    items = await run_in_threadpool(_items, rt, tenant_id, conversation_id, after, limit, order)
    return _list_page(items, limit=limit)


def _create_items(
    rt: Runtime, tenant_id: uuid.UUID, conversation_id: str, body: ItemsCreate
) -> list[ItemMessage]:
    with transaction(rt.db) as db:
        row = _require(db, conversation_id, tenant_id)
        return [item_out(m) for m in _add_items(rt, db, row.session_id, body.items)]


@router.post("/{conversation_id}/items")
async def create_items(
    conversation_id: str, body: ItemsCreate, rt: RuntimeDep, tenant_id: TenantDep
) -> object:
    """Add items (user or assistant messages) to the conversation's history."""
    items = await run_in_threadpool(_create_items, rt, tenant_id, conversation_id, body)
    return _list_page(items, limit=len(items))


def _one(
    rt: Runtime, tenant_id: uuid.UUID, conversation_id: str, item_id: str, *, remove: bool
) -> tuple[OpenAIConversation, ItemMessage]:
    with transaction(rt.db) as db:
        row = _require(db, conversation_id, tenant_id)
        message = openai_records.item(db, row.session_id, ids.parse(item_id, ids.MESSAGE, "item"))
        if message is None:
            raise NotFound(f"item {item_id!r} not found", code="item_not_found")
        out = item_out(message)
        if remove:
            openai_records.delete_item(db, message)
        return row, out


@router.get("/{conversation_id}/items/{item_id}")
async def retrieve_item(
    conversation_id: str, item_id: str, rt: RuntimeDep, tenant_id: TenantDep
) -> object:
    _, item = await run_in_threadpool(_one, rt, tenant_id, conversation_id, item_id, remove=False)
    return JSONResponse(item.model_dump(mode="json"))


@router.delete("/{conversation_id}/items/{item_id}")
async def delete_item(
    conversation_id: str, item_id: str, rt: RuntimeDep, tenant_id: TenantDep
) -> object:
    """The item leaves the conversation's history; the answer is the conversation."""
    row, _ = await run_in_threadpool(_one, rt, tenant_id, conversation_id, item_id, remove=True)
    return conversation_out(row)
