"""Sessions, their history, and turn submission."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Header, HTTPException, Query
from fastapi.responses import JSONResponse

from ...dispatch import publish
from ...runtime import Runtime
from ...store import repo
from ...store.db import transaction
from ...turns import sessions
from ...turns.dry_run import dry_run
from ...turns.guards.admission import admit_turn, replayed
from ...turns.options import TurnOptions
from ...turns.submit import submit_turn
from ..deps import CallerDep, RuntimeDep, TenantDep
from ..images import checked_images
from ..ratelimit import take_session, take_turn
from ..schemas import (
    MessagesPage,
    SessionCreate,
    SessionItem,
    SessionList,
    SessionOut,
    TurnAccepted,
    TurnCreate,
)
from ..views import (
    events_url,
    messages_page,
    require_session,
    require_session_with_activity,
    session_out,
)

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])
MAX_SEQ = 2**31 - 1


@router.post(
    "",
    status_code=201,
    response_model=SessionOut,
    responses={429: {"description": "too many new sessions; see Retry-After"}},
)
def create_session(body: SessionCreate, rt: RuntimeDep, tenant_id: TenantDep) -> SessionOut:
    """Create a conversation."""
    take_session(rt, tenant_id)
    session = sessions.create_session(rt, tenant_id, body.spec())
    with transaction(rt.db) as db:
        return session_out(rt, db, session)


@router.get("", response_model=SessionList)
def list_sessions(
    rt: RuntimeDep,
    tenant_id: TenantDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    before: Annotated[
        uuid.UUID | None, Query(description="Only sessions older than this one.")
    ] = None,
) -> SessionList:
    """The tenant's sessions, newest first; page on with `before` = the last id."""
    with transaction(rt.db) as db:
        rows = repo.recent_sessions(db, tenant_id, limit=limit + 1, before=before)
        items = [
            SessionItem(id=s.id, name=s.name, created_at=s.created_at, last_activity_at=at)
            for s, at in rows[:limit]
        ]
    return SessionList(sessions=items, next_before=items[-1].id if len(rows) > limit else None)


@router.get("/{session_id}", response_model=SessionOut)
def get_session(session_id: uuid.UUID, rt: RuntimeDep, caller: CallerDep) -> SessionOut:
    """A session with its rolling summary and active turn."""
    caller.require_read(session_id, f"session {session_id}")
    with transaction(rt.db) as db:
        session, at = require_session_with_activity(db, session_id, caller.tenant_id)
        return session_out(rt, db, session, last_activity_at=at)


@router.get("/{session_id}/messages", response_model=MessagesPage)
def list_messages(
    session_id: uuid.UUID,
    rt: RuntimeDep,
    caller: CallerDep,
    after: Annotated[
        int, Query(ge=0, le=MAX_SEQ, description="Return messages after this seq.")
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    include_rolled_back: Annotated[
        bool, Query(description="Also the messages of rolled-back turns.")
    ] = False,
) -> MessagesPage:
    """The stored history, oldest first, paged by sequence number."""
    caller.require_read(session_id, f"session {session_id}")
    with transaction(rt.db) as db:
        session = require_session(db, session_id, caller.tenant_id)
        return messages_page(
            db, session, after=after, limit=limit, include_rolled_back=include_rolled_back
        )


def _dry_run(
    rt: Runtime,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    body: TurnCreate,
    images: tuple[str, ...],
) -> JSONResponse:
    """The turn planned, not stored; counted as a turn (it redacts)."""
    take_turn(rt, tenant_id)
    plan = dry_run(
        rt,
        tenant_id=tenant_id,
        session_id=session_id,
        content=body.text,
        turn_route=body.route_request(),
        images=images,
    )
    return JSONResponse(plan.as_json(), status_code=200)


@router.post(
    "/{session_id}/turns",
    status_code=202,
    response_model=TurnAccepted,
    responses={
        200: {"description": "the dry run (`dry_run: true`): nothing stored, reserved or sent"},
        402: {"description": "budget_exhausted: a daily budget cannot take this turn"},
        403: {"description": "a session token of scope `read`"},
        409: {"description": "busy session with if_busy=reject, or session_token_cap"},
        422: {"description": "invalid body, or Idempotency-Key reused"},
        429: {
            "description": "the tenant's turns-per-minute limit, or the end user's "
            "per_user_hourly_limit (user_rate_limited), is reached",
            "headers": {
                "Retry-After": {
                    "description": "whole seconds until a submission can be accepted",
                    "schema": {"type": "integer", "minimum": 1},
                }
            },
        },
    },
)
def post_turn(
    session_id: uuid.UUID,
    body: TurnCreate,
    rt: RuntimeDep,
    caller: CallerDep,
    idempotency_key: Annotated[str | None, Header(min_length=1, max_length=200)] = None,
) -> JSONResponse:
    """Accept one user turn; it runs in the background. Watch `events_url` for its progress.

    Each tenant may submit `tenant_turns_per_minute` turns in any minute (429 with
    `Retry-After` beyond it); replaying an Idempotency-Key already used is not counted.
    A turn the daily budget cannot take is refused (402 `budget_exhausted`), as is a turn of a
    session over its token cap (409 `session_token_cap`) or of an end user over
    `per_user_hourly_limit` (429 `user_rate_limited`). With `"dry_run": true`: 200 with the
    route, the estimate, the budget and the redactions; nothing is stored, reserved or sent."""
    caller.require_chat(session_id, f"session {session_id}")
    if caller.grant is not None and (body.user is not None or body.route_request() is not None):
        raise HTTPException(  # the end user and the route are the tenant's to choose
            403, "a session token may not set user or route; the tenant's API key may"
        )
    tenant_id = caller.tenant_id
    images = checked_images(rt.settings, body.image_urls, "content images")
    if body.dry_run:  # nothing stored, reserved or sent; counted as a turn (it redacts)
        return _dry_run(rt, tenant_id, session_id, body, images)
    known = replayed(rt, tenant_id, idempotency_key)  # the key read once
    if known is None:  # a replay creates nothing: not counted, not refused
        take_turn(rt, tenant_id)
        admit_turn(
            rt, tenant_id=tenant_id, session_id=session_id, content=body.text, user=body.user
        )
    result = submit_turn(
        rt,
        tenant_id=tenant_id,
        session_id=session_id,
        content=body.text,
        if_busy=body.if_busy,
        idempotency_key=idempotency_key,
        user=body.user,
        route=body.route_request(),
        known=known,
        options=TurnOptions(images=images).stored() if images else None,
    )
    publish(result.publish)
    turn = result.turn
    out = TurnAccepted(
        id=turn.id,
        session_id=turn.session_id,
        seq=turn.seq,
        status=turn.status,
        events_url=events_url(turn.id),
    )
    return JSONResponse(
        out.model_dump(mode="json"), status_code=202, headers={"Location": f"/v1/turns/{turn.id}"}
    )
