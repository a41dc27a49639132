"""Checkpoints, rollback, fork and regenerate (see docs/checkpoints.md)."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ...dispatch import publish
from ...store import checkpoints
from ...store.db import transaction
from ...turns.forks import fork_session, regenerate_turn
from ...turns.rollback import rollback_session
from ..checkpoint_schemas import (
    CheckpointList,
    CheckpointOut,
    ForkIn,
    RollbackIn,
    RollbackOut,
)
from ..deps import CallerDep, RuntimeDep, TenantDep
from ..ratelimit import take_turn
from ..schemas import SessionOut, TurnAccepted
from ..views import events_url, require_session, require_turn, session_out

router = APIRouter(tags=["checkpoints"])

BUSY: dict[int | str, dict[str, Any]] = {
    409: {
        "description": "session_busy: a turn is active or queued (rollback: unless "
        '`"if_busy": "interrupt"`), or not_a_checkpoint'
    }
}


@router.get("/v1/sessions/{session_id}/checkpoints", response_model=CheckpointList)
def list_checkpoints(session_id: uuid.UUID, rt: RuntimeDep, caller: CallerDep) -> CheckpointList:
    """The session's checkpoints (one per turn that ended `done` and stands), oldest first."""
    caller.require_read(session_id, f"session {session_id}")
    with transaction(rt.db) as db:
        session = require_session(db, session_id, caller.tenant_id)
        rows = checkpoints.list_checkpoints(db, session.id)
        return CheckpointList(
            checkpoints=[
                CheckpointOut(
                    id=c.id,
                    turn_id=c.turn_id,
                    turn_seq=c.turn_seq,
                    parent_id=c.parent_id,
                    created_at=c.created_at,
                    messages_upto_seq=c.messages_upto_seq,
                )
                for c in rows
            ]
        )


@router.post("/v1/sessions/{session_id}/rollback", response_model=RollbackOut, responses=BUSY)
def rollback(
    session_id: uuid.UUID, body: RollbackIn, rt: RuntimeDep, caller: CallerDep
) -> RollbackOut:
    """Return the session to a checkpoint (`to`: a turn id) or its start (`to`: null). The
    later turns become `rolled_back`; their messages leave the history and the model's
    context; the summary returns to its version then. Nothing is deleted. Idempotent."""
    caller.require_chat(session_id, f"session {session_id}")
    done = rollback_session(
        rt,
        tenant_id=caller.tenant_id,
        session_id=session_id,
        to=body.to,
        if_busy=body.if_busy,
    )
    return RollbackOut(session_id=session_id, to=done.to, rolled_back_turns=done.rolled_back_turns)


@router.post(
    "/v1/sessions/{session_id}/fork",
    status_code=201,
    response_model=SessionOut,
    responses={409: {"description": "not_a_checkpoint: the turn did not end done"}},
)
def fork(session_id: uuid.UUID, body: ForkIn, rt: RuntimeDep, tenant_id: TenantDep) -> SessionOut:
    """A new session with the same configuration, and the history and summary up to the
    checkpoint of turn `at`; it names its origin in `forked_from`. It needs the tenant's API
    key: a session token grants its own session only, and a fork is a new one."""
    new = fork_session(rt, tenant_id=tenant_id, session_id=session_id, at=body.at, name=body.name)
    with transaction(rt.db) as db:
        return session_out(rt, db, new)


@router.post(
    "/v1/turns/{turn_id}/regenerate", status_code=202, response_model=TurnAccepted, responses=BUSY
)
def regenerate(turn_id: uuid.UUID, rt: RuntimeDep, caller: CallerDep) -> JSONResponse:
    """Answer the turn's user message again: the session rolls back to just before the turn
    (which becomes `rolled_back`), and a new turn with the same message starts."""
    with transaction(rt.db) as db:
        turn = require_turn(db, turn_id, caller.tenant_id)
    caller.require_chat(turn.session_id, f"turn {turn_id}")
    take_turn(rt, caller.tenant_id)  # a regenerated turn is a turn: the per-minute limit holds
    done = regenerate_turn(rt, tenant_id=caller.tenant_id, turn_id=turn_id)
    publish(done.publish)
    new = done.turn
    out = TurnAccepted(
        id=new.id,
        session_id=new.session_id,
        seq=new.seq,
        status=new.status,
        events_url=events_url(new.id),
    )
    return JSONResponse(
        out.model_dump(mode="json"), status_code=202, headers={"Location": f"/v1/turns/{new.id}"}
    )
