"""Recording a turn's execution timeline from the places that know the facts.

An event written inside a transaction that also changes the turn (a tool result, the turn's
failure) commits with it; the others (`note`) are written by one statement of their own
(autocommit: one round trip, no transaction held open). A failure to record is logged and
never fails the step: the timeline explains, it does not decide.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from ..runtime import Runtime
from ..store import timeline
from ..store.db import autocommit_connection
from ..vocabulary import TimelineKind

log = logging.getLogger(__name__)


def note(
    rt: Runtime,
    turn_id: uuid.UUID,
    kind: TimelineKind,
    data: Mapping[str, Any],
    *,
    step: int | None = None,
) -> None:
    """Append one event by a statement of its own."""
    notes(rt, turn_id, [(kind, data)], step=step)


def notes(
    rt: Runtime,
    turn_id: uuid.UUID,
    events: Sequence[tuple[TimelineKind, Mapping[str, Any]]],
    *,
    step: int | None = None,
) -> None:
    """Append events, in order, with one statement of their own (autocommit: one round trip)."""
    if not events:
        return
    try:
        with autocommit_connection(rt.engine) as conn:
            timeline.append(conn, turn_id, events, step=step)
    except SQLAlchemyError:
        kinds = ", ".join(kind for kind, _ in events)
        log.warning("could not record the %s events of turn %s", kinds, turn_id, exc_info=True)
