"""Turn status and cancellation."""

from __future__ import annotations

import uuid

from fastapi import APIRouter

from ...dispatch import publish
from ...store.db import transaction
from ...turns.submit import cancel_turn
from ..deps import RuntimeDep, TenantDep
from ..schemas import TurnOut
from ..views import require_turn, turn_out

router = APIRouter(prefix="/v1/turns", tags=["turns"])


@router.get("/{turn_id}", response_model=TurnOut)
def get_turn(turn_id: uuid.UUID, rt: RuntimeDep, tenant_id: TenantDep) -> TurnOut:
    """Status, steps, tool calls, usage, cost, answer and error of a turn."""
    with transaction(rt.db) as db:
        return turn_out(db, require_turn(db, turn_id, tenant_id))


@router.post(
    "/{turn_id}/cancel",
    response_model=TurnOut,
    responses={409: {"description": "the turn has already ended"}},
)
def cancel(turn_id: uuid.UUID, rt: RuntimeDep, tenant_id: TenantDep) -> TurnOut:
    """Cancel a queued or running turn; its stream ends with `done` (status `cancelled`)."""
    turn, next_steps = cancel_turn(rt, tenant_id=tenant_id, turn_id=turn_id)
    publish(next_steps)
    with transaction(rt.db) as db:
        return turn_out(db, require_turn(db, turn.id, tenant_id))
