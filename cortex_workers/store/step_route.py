"""A model step's route decision and redaction counts (never the redacted values)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import update

from .db import Executor
from .models import steps_table

_s = steps_table.c


def record_route(
    db: Executor,
    step_id: uuid.UUID,
    attempt: int,
    *,
    route: dict[str, Any] | None,
    redactions: dict[str, int] | None,
) -> bool:
    """Set what is given on this attempt of the step; False if a newer attempt owns it."""
    values: dict[str, Any] = {}
    if route is not None:
        values["route"] = route
    if redactions is not None:
        values["redactions"] = redactions
    if not values:
        return True
    result = db.execute(
        update(steps_table)
        .where(_s.id == step_id, _s.attempt == attempt)
        .values(**values)
        .returning(_s.id)
    )
    return result.first() is not None
