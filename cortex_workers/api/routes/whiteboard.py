"""A coordinator session's whiteboard."""

from __future__ import annotations

import uuid
from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel, Field

from ...errors import NotFound
from ...store import whiteboard as store
from ...store.db import transaction
from ...vocabulary import BlockerStatus, WhiteboardEntryKind
from ..deps import RuntimeDep, TenantDep
from ..views import require_session

router = APIRouter(tags=["whiteboard"])


class ProgressOut(BaseModel):
    percent: int | None
    note: str


class BlockerOut(BaseModel):
    id: int
    text: str
    status: BlockerStatus
    resolution: str | None
    source: str = Field(description="`coordinator`, or the agent that suggested it")
    created_at: datetime
    resolved_at: datetime | None


class EntryOut(BaseModel):
    id: int
    kind: WhiteboardEntryKind
    text: str
    detail: str | None
    source: str
    created_at: datetime


class WhiteboardOut(BaseModel):
    session_id: uuid.UUID
    mission: str
    focus: str
    progress: ProgressOut
    blockers: list[BlockerOut] = Field(description="Open and resolved, oldest first")
    decisions: list[EntryOut] = Field(description="The last 50, oldest first")
    updates: list[EntryOut] = Field(description="The last 20 changes of any kind, oldest first")
    updated_at: datetime


def _entry(e: store.Entry) -> EntryOut:
    return EntryOut(
        id=e.id, kind=e.kind, text=e.text, detail=e.detail, source=e.source, created_at=e.created_at
    )


@router.get("/v1/sessions/{session_id}/whiteboard", response_model=WhiteboardOut)
def get_whiteboard(session_id: uuid.UUID, rt: RuntimeDep, tenant_id: TenantDep) -> WhiteboardOut:
    """The whiteboard of a session created with `whiteboard: true` (404 for any other)."""
    with transaction(rt.db) as db:
        require_session(db, session_id, tenant_id)
        board = store.read_board(db, session_id)
    if board is None:
        raise NotFound(
            f"session {session_id} has no whiteboard (create it with whiteboard: true)",
            code="no_whiteboard",
        )
    return WhiteboardOut(
        session_id=session_id,
        mission=board.mission,
        focus=board.focus,
        progress=ProgressOut(percent=board.progress, note=board.progress_note),
        blockers=[
            BlockerOut(
                id=b.id,
                text=b.text,
                status=b.status,
                resolution=b.resolution,
                source=b.source,
                created_at=b.created_at,
                resolved_at=b.resolved_at,
            )
            for b in board.blockers
        ],
        decisions=[_entry(d) for d in board.decisions],
        updates=[_entry(u) for u in board.updates],
        updated_at=board.updated_at,
    )
