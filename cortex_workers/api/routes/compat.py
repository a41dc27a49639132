"""The reference-compatible endpoints: `POST /input` and `GET /output/stream`.

A conversation is a session; an input is a turn. Answers stream as bare text chunks (see
`plain_stream`); docs/ui.md describes the wire."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse

from ...dispatch import publish
from ...errors import NotFound
from ...runtime import Runtime
from ...store.db import transaction
from ...turns import sessions
from ...turns.sessions import SessionSpec
from ...turns.submit import submit_turn
from ..deps import RuntimeDep, TenantDep
from ..plain_stream import plain_events
from ..ratelimit import take_session, take_turn
from ..schemas import MAX_TEXT
from ..session_stream import session_events
from ..views import require_session, require_turn
from .events import SSE_RESPONSES, counted, guarded

router = APIRouter(tags=["compatibility"])


class InputIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: str = Field(min_length=1, max_length=MAX_TEXT)
    conversation_id: uuid.UUID | None = Field(
        default=None, description="An existing conversation (a session id); none starts one."
    )


class InputAccepted(BaseModel):
    status: str = "processing"
    conversation_id: uuid.UUID
    turn_id: uuid.UUID


def _conversation(
    rt: Runtime, tenant_id: uuid.UUID, conversation_id: uuid.UUID | None
) -> uuid.UUID:
    if conversation_id is not None:
        with transaction(rt.db) as db:
            return require_session(db, conversation_id, tenant_id).id
    take_session(rt, tenant_id)
    return sessions.create_session(rt, tenant_id, SessionSpec(name="conversation")).id


@router.post("/input", status_code=202, response_model=InputAccepted)
def post_input(body: InputIn, rt: RuntimeDep, tenant_id: TenantDep) -> JSONResponse:
    """One user message for a conversation (a new one without `conversation_id`): it is
    answered in the background, on `GET /output/stream`."""
    session_id = _conversation(rt, tenant_id, body.conversation_id)
    take_turn(rt, tenant_id)
    result = submit_turn(
        rt,
        tenant_id=tenant_id,
        session_id=session_id,
        content=body.content,
        if_busy="enqueue",
        idempotency_key=None,
    )
    publish(result.publish)
    out = InputAccepted(conversation_id=session_id, turn_id=result.turn.id)
    return JSONResponse(out.model_dump(mode="json"), status_code=202)


def _start_at(
    rt: Runtime, tenant_id: uuid.UUID, session_id: uuid.UUID, turn_id: uuid.UUID | None
) -> str | None:
    """The session-stream cursor just before `turn_id`'s first event (None: the active turn)."""
    if turn_id is None:
        return None
    with transaction(rt.db) as db:
        turn = require_turn(db, turn_id, tenant_id)
        if turn.session_id != session_id:
            raise NotFound(f"turn {turn_id} not found in conversation {session_id}")
        return f"{turn.seq}:0-0"


@router.get("/output/stream", responses=SSE_RESPONSES)
async def output_stream(
    request: Request,
    rt: RuntimeDep,
    tenant_id: TenantDep,
    conversation_id: Annotated[uuid.UUID, Query(description="The conversation (session) id.")],
    turn_id: Annotated[
        uuid.UUID | None,
        Query(description="Start at this answer (as `POST /input` returned it), even if done."),
    ] = None,
) -> EventSourceResponse:
    """Each answer of the conversation, from its active turn on, as `data: <text chunk>`
    events ending with `data: [DONE]`; a failure sends `data: ERROR: <message>` first."""
    last_id = await run_in_threadpool(_start_at, rt, tenant_id, conversation_id, turn_id)
    events = await session_events(
        rt, request.app.state.redis, conversation_id, tenant_id=tenant_id, last_id=last_id
    )
    events = await guarded(rt, request, tenant_id, events, slotted=True)  # docs/security.md
    return EventSourceResponse(
        counted("session", plain_events(events)), ping=int(rt.settings.sse_ping_s)
    )
