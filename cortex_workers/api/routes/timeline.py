"""A turn's execution timeline: what happened, step by step, in order."""

from __future__ import annotations

import uuid
from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel

from ...messages import JsonObject
from ...store import timeline
from ...store.db import transaction
from ...vocabulary import TimelineKind
from ..deps import CallerDep, RuntimeDep
from ..views import require_turn

router = APIRouter(prefix="/v1/turns", tags=["turns"])


class TimelineItem(BaseModel):
    """One event: when, in which step (null: the turn's own), what kind, and its facts."""

    at: datetime
    step: int | None
    kind: TimelineKind
    data: JsonObject


class TimelineOut(BaseModel):
    timeline: list[TimelineItem]


@router.get("/{turn_id}/timeline", response_model=TimelineOut)
def get_timeline(turn_id: uuid.UUID, rt: RuntimeDep, caller: CallerDep) -> TimelineOut:
    """The turn's execution events, oldest first (see docs/checkpoints.md)."""
    with transaction(rt.db) as db:
        turn = require_turn(db, turn_id, caller.tenant_id)
        caller.require_read(turn.session_id, f"turn {turn_id}")
        events = timeline.of_turn(db, turn_id)
    items = [TimelineItem(at=e.at, step=e.step, kind=e.kind, data=e.data) for e in events]
    return TimelineOut(timeline=items)
