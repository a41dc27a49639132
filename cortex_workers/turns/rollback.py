"""Rollback: a session returns to a checkpoint (or its start). The later turns become
`rolled_back`, their messages leave the history and the model's context, and the rolling
summary returns to its version at that checkpoint. Nothing is deleted."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Literal, assert_never

from sqlalchemy.orm import Session as Db

from ..errors import ConflictError, NotFound
from ..messages import ErrorDoc
from ..runtime import Runtime
from ..store import checkpoints, new_turns, repo
from ..store.checkpoints import RestorePoint
from ..store.db import transaction
from ..store.models import Session
from ..vocabulary import ACTIVE_TURN_STATUSES, TurnStatus
from .lifecycle import Ended, announce, end_turn
from .steps import NextStep

RollbackIfBusy = Literal["reject", "interrupt"]


@dataclass(frozen=True, slots=True)
class RolledBack:
    """What a rollback did: the checkpoint's turn (None: the start) and the turns it moved."""

    session_id: uuid.UUID
    to: uuid.UUID | None
    rolled_back_turns: int
    ended: list[Ended] = field(default_factory=list)
    """Active turns an `interrupt` cancelled (announced after the commit)."""


def make_idle(rt: Runtime, db: Db, session_id: uuid.UUID, if_busy: RollbackIfBusy) -> list[Ended]:
    """Refuse (409 `session_busy`) or cancel the session's active turns. Caller holds the
    session lock; announce what it returns after the commit."""
    active = repo.active_turns(db, session_id)
    if not active:
        return []
    match if_busy:
        case "reject":
            raise ConflictError(
                "the session is busy with another turn; retry when it ends or use "
                'if_busy="interrupt"',
                code="session_busy",
                details={"active_turn_id": str(active[0].id)},
            )
        case "interrupt":
            ended = []
            for turn in reversed(active):  # newest first: nothing doomed gets promoted
                done, _ = end_turn(
                    rt, db, session_id=session_id, turn_id=turn.id, status=TurnStatus.CANCELLED
                )
                if done is not None:
                    ended.append(done)
            return ended
        case _:
            assert_never(if_busy)


def restore_point(db: Db, session: Session, to: uuid.UUID | None) -> RestorePoint:
    """The checkpoint of turn `to` (None: the session's start)."""
    if to is None:
        return checkpoints.start_of(db, session)
    checkpoint = checkpoints.checkpoint_of(db, session.id, to)
    if checkpoint is not None:
        return checkpoints.point_of(checkpoint)
    turn = repo.get_turn(db, to, tenant_id=session.tenant_id)
    if turn is None or turn.session_id != session.id:
        raise NotFound(f"turn {to} not found in session {session.id}")
    raise ConflictError(
        f"turn {to} is not a checkpoint ({turn.status}): only a turn that ended done is",
        code="not_a_checkpoint",
        details={"status": turn.status},
    )


def locked_session(db: Db, tenant_id: uuid.UUID, session_id: uuid.UUID) -> Session:
    if not new_turns.lock_session(db, session_id, tenant_id):
        raise NotFound(f"session {session_id} not found")
    session = repo.get_session(db, session_id)
    assert session is not None  # locked above
    return session


def rollback_session(
    rt: Runtime,
    *,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    to: uuid.UUID | None,
    if_busy: RollbackIfBusy = "reject",
) -> RolledBack:
    """Roll the session back to turn `to`'s checkpoint (None: its start). Idempotent."""
    with transaction(rt.db) as db:
        session = locked_session(db, tenant_id, session_id)
        ended = make_idle(rt, db, session_id, if_busy)
        moved = checkpoints.roll_back(db, session_id, restore_point(db, session, to))
    for done in ended:
        announce(rt, done)
    return RolledBack(session_id, to, moved, ended)


def rollback_to_last_checkpoint(
    rt: Runtime,
    db: Db,
    *,
    session_id: uuid.UUID,
    turn_id: uuid.UUID,
    error: ErrorDoc,
) -> tuple[Ended | None, list[NextStep]]:
    """Restore the session to the last checkpoint before the active turn `turn_id` (or its
    start): the turn's messages and any later summary leave the context; then end the turn
    as `rolled_back` with `error` (`{"code", "message"}`) and promote the next queued turn.
    Caller holds the session lock; after the commit it announces the `Ended` and publishes
    the steps. (None, []) when the turn had already ended."""
    turn = repo.get_turn(db, turn_id)
    session = repo.get_session(db, session_id)
    if turn is None or session is None or turn.status not in ACTIVE_TURN_STATUSES:
        return None, []
    checkpoints.roll_back(db, session_id, checkpoints.point_before(db, session, turn.seq))
    return end_turn(
        rt, db, session_id=session_id, turn_id=turn_id, status=TurnStatus.ROLLED_BACK, error=error
    )
