"""Scheduled turns: create, list and delete a session's schedules."""

from __future__ import annotations

import uuid
from datetime import datetime

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from ...errors import NotFound
from ...store import schedules as store
from ...store.db import transaction
from ...turns.schedules import Rule, create_schedule
from ..deps import RuntimeDep, TenantDep
from ..schemas import MAX_TEXT, StorableBody
from ..views import require_session

router = APIRouter(tags=["schedules"])


class ScheduleCreate(StorableBody):
    """A turn posted on a schedule: `cron` (in `timezone`, default UTC) or `every_s`."""

    content: str = Field(min_length=1, max_length=MAX_TEXT, description="The turn's message")
    cron: str | None = Field(
        default=None, max_length=200, description="Five fields, e.g. '0 8 * * 1-5'"
    )
    timezone: str | None = Field(
        default=None, max_length=64, description="IANA name for `cron`, e.g. 'Europe/Paris'"
    )
    every_s: float | None = Field(default=None, description="A period of at least 1 second")


class ScheduleRefusal(BaseModel):
    """Why the last firing stored no turn."""

    code: str = Field(
        description="rate_limited, budget_exhausted, session_token_cap or user_rate_limited"
    )
    message: str
    at: datetime


class ScheduleOut(BaseModel):
    id: uuid.UUID
    session_id: uuid.UUID
    content: str
    cron: str | None
    timezone: str | None
    every_s: float | None
    next_run_at: datetime
    last_run_at: datetime | None
    last_turn_id: uuid.UUID | None
    fired: int = Field(description="How many times it fired (one turn each)")
    last_error: ScheduleRefusal | None = Field(
        default=None,
        description="Why its last firing was refused (no turn stored); cleared by the next "
        "firing that stores its turn",
    )
    created_at: datetime


class SchedulesOut(BaseModel):
    schedules: list[ScheduleOut]


def _refusal(doc: store.RefusalDoc | None) -> ScheduleRefusal | None:
    if doc is None:
        return None
    return ScheduleRefusal(
        code=doc["code"], message=doc["message"], at=datetime.fromisoformat(doc["at"])
    )


def _out(row: store.Schedule) -> ScheduleOut:
    return ScheduleOut(
        id=row.id,
        session_id=row.session_id,
        content=row.content,
        cron=row.cron,
        timezone=row.timezone,
        every_s=row.every_s,
        next_run_at=row.next_run_at,
        last_run_at=row.last_run_at,
        last_turn_id=row.last_turn_id,
        fired=row.fired,
        last_error=_refusal(row.last_error),
        created_at=row.created_at,
    )


@router.post("/v1/sessions/{session_id}/schedules", status_code=201, response_model=ScheduleOut)
def post_schedule(
    session_id: uuid.UUID, body: ScheduleCreate, rt: RuntimeDep, tenant_id: TenantDep
) -> ScheduleOut:
    """Post `content` as a turn of the session at each fire time (queued while the session
    is busy). Each fire time gives exactly one turn; one missed while nothing ran fires once."""
    rule = Rule(cron=body.cron, timezone=body.timezone, every_s=body.every_s)
    row = create_schedule(
        rt, tenant_id=tenant_id, session_id=session_id, content=body.content, rule=rule
    )
    return _out(row)


@router.get("/v1/sessions/{session_id}/schedules", response_model=SchedulesOut)
def list_schedules(session_id: uuid.UUID, rt: RuntimeDep, tenant_id: TenantDep) -> SchedulesOut:
    with transaction(rt.db) as db:
        require_session(db, session_id, tenant_id)
        rows = store.session_schedules(db, session_id, tenant_id=tenant_id)
    return SchedulesOut(schedules=[_out(r) for r in rows])


@router.delete("/v1/schedules/{schedule_id}", status_code=204, response_class=Response)
def delete_schedule(schedule_id: uuid.UUID, rt: RuntimeDep, tenant_id: TenantDep) -> Response:
    """Remove a schedule; turns it already created are kept."""
    with transaction(rt.db) as db:
        if not store.delete_schedule(db, schedule_id, tenant_id=tenant_id):
            raise NotFound(f"schedule {schedule_id} not found")
    return Response(status_code=204)
