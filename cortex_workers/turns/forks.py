"""Fork a session at a checkpoint, and regenerate a turn's answer."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..errors import ConflictError, NotFound
from ..observability.tracing import current_traceparent
from ..runtime import Runtime
from ..store import checkpoints, new_turns, repo
from ..store.db import transaction
from ..store.models import Session, Turn
from ..vocabulary import StepKind, TurnStatus
from .rollback import locked_session, make_idle
from .steps import NextStep, step_ref
from .submit import request_hash


def fork_session(
    rt: Runtime,
    *,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    at: uuid.UUID,
    name: str | None = None,
) -> Session:
    """A new session with `session_id`'s configuration, and its history and summary up to the
    checkpoint of turn `at`; independent of the original afterwards."""
    with transaction(rt.db) as db:
        source = repo.get_session(db, session_id, tenant_id=tenant_id)
        if source is None:
            raise NotFound(f"session {session_id} not found")
        checkpoint = checkpoints.checkpoint_of(db, session_id, at)
        if checkpoint is None:
            turn = repo.get_turn(db, at, tenant_id=tenant_id)
            if turn is None or turn.session_id != session_id:
                raise NotFound(f"turn {at} not found in session {session_id}")
            raise ConflictError(
                f"turn {at} is not a checkpoint ({turn.status}): only a turn that ended done is",
                code="not_a_checkpoint",
                details={"status": turn.status},
            )
        fork = repo.insert_session(
            db,
            tenant_id,
            name=name if name is not None else source.name,
            system_prompt=source.system_prompt,
            provider=source.provider,
            model=source.model,
            tools=source.tools,
            metadata_=dict(source.metadata_ or {}),
            user=source.user,
            mode=source.mode,
            route=source.route,
        )
        fork.summary = checkpoint.summary
        fork.summary_upto_seq = checkpoint.summary_upto_seq
        fork.forked_from_session_id = session_id
        fork.forked_from_turn_id = at
        db.flush()
        checkpoints.copy_history(db, session_id, fork.id, upto_seq=checkpoint.messages_upto_seq)
        db.refresh(fork)
    return fork


@dataclass(frozen=True, slots=True)
class Regenerated:
    turn: new_turns.NewTurn
    publish: list[NextStep]


def regenerate_turn(rt: Runtime, *, tenant_id: uuid.UUID, turn_id: uuid.UUID) -> Regenerated:
    """Roll the session back to just before `turn_id`, then start a new turn with the same
    user message, in one transaction. 409 `session_busy` while a turn is active."""
    with transaction(rt.db) as db:
        found = repo.get_turn(db, turn_id, tenant_id=tenant_id)
        if found is None:
            raise NotFound(f"turn {turn_id} not found")
        session = locked_session(db, tenant_id, found.session_id)
        turn = repo.get_turn(db, turn_id)
        assert turn is not None
        _check_regenerable(turn)
        make_idle(rt, db, session.id, "reject")
        last = checkpoints.last_checkpoint_before(db, session.id, turn.seq)
        point = (
            checkpoints.point_of(last) if last is not None else checkpoints.start_of(db, session)
        )
        checkpoints.roll_back(db, session.id, point)
        new = new_turns.insert_turn(
            db,
            tenant_id=tenant_id,
            session_id=session.id,
            start_timeout_s=rt.settings.turn_timeout_s,
            content=turn.content,
            request_hash=request_hash(session.id, turn.content, "reject", turn.user, turn.route),
            traceparent=current_traceparent(),
            user=turn.user,
            route=turn.route,
        )
    publish = step_ref(new.first_step_id, StepKind.MODEL, turn_id=new.id, session_id=session.id)
    return Regenerated(new, publish)


def _check_regenerable(turn: Turn) -> None:
    if turn.status == TurnStatus.ROLLED_BACK:
        raise ConflictError(
            f"turn {turn.id} was rolled back; regenerate the turn that replaced it",
            code="turn_rolled_back",
            details={"status": turn.status},
        )
