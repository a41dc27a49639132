"""Tool calls: one row per call a model step asked for, and its result, stored once."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session as Db

from ..messages import JsonObject
from .models import ToolCallRow
from .repo import storable_json


def insert_tool_call(
    db: Db,
    *,
    turn_id: uuid.UUID,
    step_id: uuid.UUID,
    call_id: str,
    name: str,
    arguments: JsonObject,
) -> uuid.UUID | None:
    return db.execute(
        insert(ToolCallRow)
        .values(
            id=uuid.uuid4(),
            turn_id=turn_id,
            step_id=step_id,
            call_id=call_id,
            name=name,
            arguments=storable_json(arguments),
        )
        .on_conflict_do_nothing()
        .returning(ToolCallRow.id)
    ).scalar_one_or_none()


def of_turn(db: Db, turn_id: uuid.UUID) -> Sequence[ToolCallRow]:
    return _in_order(db, ToolCallRow.turn_id == turn_id)


def of_step(db: Db, step_id: uuid.UUID) -> Sequence[ToolCallRow]:
    return _in_order(db, ToolCallRow.step_id == step_id)


def _in_order(db: Db, where: Any) -> Sequence[ToolCallRow]:
    query = select(ToolCallRow).where(where).order_by(ToolCallRow.created_at)
    return db.execute(query).scalars().all()
