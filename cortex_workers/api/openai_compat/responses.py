"""`/v1/responses`: create, retrieve (and resume its stream), cancel, delete, input items."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from openai.types.responses import ResponseInputImage, ResponseInputText
from openai.types.responses.response_function_tool_call_item import ResponseFunctionToolCallItem
from openai.types.responses.response_function_tool_call_output_item import (
    ResponseFunctionToolCallOutputItem,
)
from openai.types.responses.response_input_message_item import ResponseInputMessageItem
from sse_starlette import EventSourceResponse, ServerSentEvent

from ...dispatch import publish
from ...errors import ConflictError
from ...runtime import Runtime
from ...store import openai_records
from ...store.db import transaction
from ...store.repo import TERMINAL
from ...turns.submit import cancel_turn
from ..deps import RuntimeDep, TenantDep
from ..routes.events import SSE_RESPONSES, counted
from . import ids
from .create import create_response
from .errors import OpenAIBadRequest
from .input_items import StoredItem
from .requests import ResponseCreate
from .stream import reloader, response_sse, wait_for_end
from .views import Loaded, list_page, load, response_of

router = APIRouter(prefix="/v1/responses", tags=["openai"])
Limit = Annotated[int, Query(ge=1, le=100)]
Order = Annotated[Literal["asc", "desc"], Query()]


def _json(loaded: Loaded) -> JSONResponse:
    return JSONResponse(response_of(loaded).model_dump(mode="json"))


def _stream(rt: Runtime, body: AsyncIterator[ServerSentEvent]) -> EventSourceResponse:
    return EventSourceResponse(counted("turn", body), ping=int(rt.settings.sse_ping_s))


@router.post("", responses=SSE_RESPONSES)
async def create(
    body: ResponseCreate,
    request: Request,
    rt: RuntimeDep,
    tenant_id: TenantDep,
    idempotency_key: Annotated[str | None, Header(min_length=1, max_length=200)] = None,
) -> object:
    """Create a response: a turn of its conversation or chain. With `stream`, its events;
    with `background`, the queued response at once; otherwise the response once it ended."""
    response_id = await run_in_threadpool(create_response, rt, tenant_id, body, idempotency_key)
    reload = reloader(rt, response_id, tenant_id)
    loaded = await run_in_threadpool(reload)
    client = request.app.state.redis
    if body.stream:
        return _stream(rt, await response_sse(rt, client, loaded, reload))
    if not body.background:
        await wait_for_end(rt, client, loaded)
        loaded = await run_in_threadpool(reload)
    return _json(loaded)


def _load(rt: Runtime, response_id: str, tenant_id: uuid.UUID) -> Loaded:
    with transaction(rt.db) as db:
        return load(db, response_id, tenant_id)


@router.get("/{response_id}", responses=SSE_RESPONSES)
async def retrieve(
    response_id: str,
    request: Request,
    rt: RuntimeDep,
    tenant_id: TenantDep,
    stream: bool = False,
    starting_after: Annotated[int | None, Query(ge=0)] = None,
) -> object:
    """The response; with `stream=true`, its events after `starting_after` (from the live
    stream, or rebuilt from Postgres once that expired)."""
    loaded = await run_in_threadpool(_load, rt, response_id, tenant_id)
    if not stream:
        if starting_after is not None:
            raise OpenAIBadRequest("starting_after needs stream=true", param="starting_after")
        return _json(loaded)
    after = -1 if starting_after is None else starting_after
    reload = reloader(rt, response_id, tenant_id)
    body = await response_sse(rt, request.app.state.redis, loaded, reload, starting_after=after)
    return _stream(rt, body)


def _cancel(rt: Runtime, response_id: str, tenant_id: uuid.UUID) -> Loaded:
    loaded = _load(rt, response_id, tenant_id)
    if not loaded.request.get("background"):
        raise OpenAIBadRequest(
            "only responses created with background=true can be cancelled",
            param="response_id",
        )
    if loaded.turn.status not in TERMINAL:
        try:
            _, next_steps = cancel_turn(rt, tenant_id=loaded.turn.tenant_id, turn_id=loaded.turn.id)
            publish(next_steps)
        except ConflictError:
            pass  # it ended meanwhile: answered as it ended
    return _load(rt, response_id, tenant_id)


@router.post("/{response_id}/cancel")
async def cancel(response_id: str, rt: RuntimeDep, tenant_id: TenantDep) -> object:
    """Cancel a background response; one that has ended answers unchanged."""
    return _json(await run_in_threadpool(_cancel, rt, response_id, tenant_id))


def _delete(rt: Runtime, response_id: str, tenant_id: uuid.UUID) -> None:
    with transaction(rt.db) as db:
        loaded = load(db, response_id, tenant_id)
        openai_records.delete_response(db, loaded.turn.id, loaded.turn.tenant_id)


@router.delete("/{response_id}")
async def delete(response_id: str, rt: RuntimeDep, tenant_id: TenantDep) -> object:
    """The response is no longer retrievable (its turn stays, under the retention policy)."""
    await run_in_threadpool(_delete, rt, response_id, tenant_id)
    return JSONResponse({"id": response_id, "object": "response", "deleted": True})


InputItem = (
    ResponseInputMessageItem | ResponseFunctionToolCallItem | ResponseFunctionToolCallOutputItem
)


def _input_item(turn_hex: str, i: int, item: StoredItem) -> InputItem:
    item_id = f"{ids.MESSAGE}{turn_hex}_in{i}"
    match item.get("type"):
        case "function_call":
            return ResponseFunctionToolCallItem(
                id=item_id, type="function_call", status="completed", call_id=item["call_id"],
                name=item["name"], arguments=item["arguments"],
            )  # fmt: skip
        case "function_call_output":
            return ResponseFunctionToolCallOutputItem(
                id=item_id, type="function_call_output", status="completed",
                call_id=item["call_id"], output=item["output"],
            )  # fmt: skip
        case _:
            content: list[ResponseInputText | ResponseInputImage] = []
            if item["text"] or not item.get("images"):
                content.append(ResponseInputText(type="input_text", text=item["text"]))
            content += [
                ResponseInputImage(type="input_image", image_url=url, detail="auto")
                for url in item.get("images") or ()
            ]
            return ResponseInputMessageItem(
                id=item_id,
                type="message",
                role=item["role"],  # type: ignore[arg-type]  # user or assistant, as given
                status="completed",
                content=content,  # type: ignore[arg-type]
            )


def input_items(loaded: Loaded) -> list[InputItem]:
    turn_hex = loaded.turn.id.hex
    return [
        _input_item(turn_hex, i, item) for i, item in enumerate(loaded.request.get("input", []))
    ]


def page(items: list[InputItem], *, after: str | None, limit: int, order: str) -> JSONResponse:
    """The page of `items` after `after`, in `order`."""
    ordered = items if order == "asc" else list(reversed(items))
    if after is not None:
        at = next((i for i, item in enumerate(ordered) if item.id == after), None)
        if at is None:
            raise OpenAIBadRequest(f"no item {after!r} in this list", param="after")
        ordered = ordered[at + 1 :]
    return list_page(ordered[:limit], has_more=len(ordered) > limit)


@router.get("/{response_id}/input_items")
async def list_input_items(
    response_id: str,
    rt: RuntimeDep,
    tenant_id: TenantDep,
    after: str | None = None,
    limit: Limit = 20,
    order: Order = "desc",
) -> object:
    """The response's input items, paged as OpenAI pages them."""
    loaded = await run_in_threadpool(_load, rt, response_id, tenant_id)
    return page(input_items(loaded), after=after, limit=limit, order=order)
