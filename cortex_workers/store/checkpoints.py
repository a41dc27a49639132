"""Checkpoints, rollback and fork: the SQL. A rollback is a state change of turns and
messages, never a delete. Callers hold the session's lock (`new_turns.lock_session`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import insert, select, update
from sqlalchemy.orm import Session as Db

from ..vocabulary import TurnStatus
from .checkpoint_models import Checkpoint
from .models import Message, Session, Turn


@dataclass(frozen=True, slots=True)
class RestorePoint:
    """Where a rollback returns a session: the last message kept and the summary then."""

    turn_seq: int
    messages_upto_seq: int
    summary: str
    summary_upto_seq: int


START = RestorePoint(turn_seq=0, messages_upto_seq=0, summary="", summary_upto_seq=0)


def list_checkpoints(db: Db, session_id: uuid.UUID) -> Sequence[Checkpoint]:
    """The session's checkpoints whose turn is not rolled back, oldest first."""
    return (
        db.execute(
            select(Checkpoint)
            .join(Turn, Turn.id == Checkpoint.turn_id)
            .where(Checkpoint.session_id == session_id, Turn.status == TurnStatus.DONE)
            .order_by(Checkpoint.turn_seq)
        )
        .scalars()
        .all()
    )


def checkpoint_of(db: Db, session_id: uuid.UUID, turn_id: uuid.UUID) -> Checkpoint | None:
    """The checkpoint of `turn_id` in the session, if that turn ended done and stands."""
    return db.execute(
        select(Checkpoint)
        .join(Turn, Turn.id == Checkpoint.turn_id)
        .where(
            Checkpoint.session_id == session_id,
            Checkpoint.turn_id == turn_id,
            Turn.status == TurnStatus.DONE,
        )
    ).scalar_one_or_none()


def last_checkpoint_before(db: Db, session_id: uuid.UUID, turn_seq: int) -> Checkpoint | None:
    """The newest standing checkpoint of a turn older than `turn_seq`."""
    return (
        db.execute(
            select(Checkpoint)
            .join(Turn, Turn.id == Checkpoint.turn_id)
            .where(
                Checkpoint.session_id == session_id,
                Checkpoint.turn_seq < turn_seq,
                Turn.status == TurnStatus.DONE,
            )
            .order_by(Checkpoint.turn_seq.desc())
            .limit(1)
        )
        .scalars()
        .first()
    )


def point_of(checkpoint: Checkpoint) -> RestorePoint:
    return RestorePoint(
        turn_seq=checkpoint.turn_seq,
        messages_upto_seq=checkpoint.messages_upto_seq,
        summary=checkpoint.summary,
        summary_upto_seq=checkpoint.summary_upto_seq,
    )


def start_of(db: Db, session: Session) -> RestorePoint:
    """A session's start: empty, or for a fork the checkpoint it was forked at."""
    if session.forked_from_turn_id is None:
        return START
    origin = db.execute(
        select(Checkpoint).where(Checkpoint.turn_id == session.forked_from_turn_id)
    ).scalar_one_or_none()
    if origin is None:  # the original session was deleted: keep what the fork copied
        return RestorePoint(0, session.last_message_seq, session.summary, session.summary_upto_seq)
    return RestorePoint(0, origin.messages_upto_seq, origin.summary, origin.summary_upto_seq)


def roll_back(db: Db, session_id: uuid.UUID, point: RestorePoint) -> int:
    """Move the session's ended turns after `point` to `rolled_back`, their messages out of the
    history, and the summary back to its version then. Returns how many turns it moved (0 when
    already there: idempotent)."""
    moved = db.execute(
        update(Turn)
        .where(
            Turn.session_id == session_id,
            Turn.seq > point.turn_seq,
            Turn.status.in_([TurnStatus.DONE, TurnStatus.FAILED, TurnStatus.CANCELLED]),
        )
        .values(status=TurnStatus.ROLLED_BACK)
        .returning(Turn.id)
    ).all()
    db.execute(
        update(Message)
        .where(
            Message.session_id == session_id,
            Message.seq > point.messages_upto_seq,
            ~Message.rolled_back,
        )
        .values(rolled_back=True)
    )
    db.execute(
        update(Session)
        .where(Session.id == session_id)
        .values(summary=point.summary, summary_upto_seq=point.summary_upto_seq)
    )
    return len(moved)


def copy_history(db: Db, source: uuid.UUID, target: uuid.UUID, *, upto_seq: int) -> None:
    """Copy the standing messages of `source` up to `upto_seq` into `target` (same seqs, no
    turn: the fork's history starts with them), and set `target`'s message counter."""
    m = Message.__table__.c
    kept = select(
        m.id,  # replaced below
        m.seq,
        m.role,
        m.content,
        m.tool_calls,
        m.tool_call_id,
        m.name,
        m.is_error,
    ).where(m.session_id == source, m.seq <= upto_seq, ~m.rolled_back)
    rows = [
        {
            "id": uuid.uuid4(),
            "session_id": target,
            "seq": r.seq,
            "role": r.role,
            "content": r.content,
            "tool_calls": r.tool_calls,
            "tool_call_id": r.tool_call_id,
            "name": r.name,
            "is_error": r.is_error,
        }
        for r in db.execute(kept)
    ]
    if rows:
        db.execute(insert(Message), rows)
    db.execute(update(Session).where(Session.id == target).values(last_message_seq=upto_seq))


def point_before(db: Db, session: Session, turn_seq: int) -> RestorePoint:
    """The last standing checkpoint before turn `turn_seq`, or the session's start."""
    last = last_checkpoint_before(db, session.id, turn_seq)
    return point_of(last) if last is not None else start_of(db, session)
