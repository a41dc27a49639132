"""Accepting a turn (with per-session ordering and idempotency) and cancelling one."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Literal, assert_never

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session as Db

from ..errors import ConflictError, InvalidRequest, NotFound
from ..messages import JsonObject
from ..observability.tracing import current_traceparent
from ..runtime import Runtime
from ..store import new_turns, repo
from ..store.db import autocommit_connection, transaction
from ..store.models import Turn
from ..vocabulary import StepKind, TurnStatus
from .lifecycle import Ended, announce, end_turn, promote_next
from .steps import NextStep, step_ref

IfBusy = Literal["enqueue", "reject", "interrupt"]


@dataclass(frozen=True, slots=True)
class NewTurnSpec:
    """What a submission asks to store."""

    content: str
    if_busy: IfBusy
    idempotency_key: str | None
    digest: str
    """The request hash an Idempotency-Key is bound to."""
    user: str | None = None
    route: JsonObject | None = None
    """The turn's route request (`routing.RouteSpec`, as stored)."""
    options: JsonObject | None = None
    """What the turn asks of its model calls (`turns.options.TurnOptions`, as stored)."""


@dataclass
class Submitted:
    """The accepted turn, whether this request created it, and what to publish."""

    turn: Turn | new_turns.NewTurn
    created: bool
    publish: list[NextStep] = field(default_factory=list)


def request_hash(
    session_id: uuid.UUID,
    content: str,
    if_busy: IfBusy,
    user: str | None = None,
    route: JsonObject | None = None,
    options: JsonObject | None = None,
) -> str:
    """What an Idempotency-Key is bound to: the same key with another request is refused."""
    fields = {"session": str(session_id), "content": content, "if_busy": if_busy}
    if user is not None:
        fields["user"] = user
    if route is not None:
        fields["route"] = json.dumps(route, sort_keys=True)
    if options is not None:
        fields["options"] = json.dumps(options, sort_keys=True)
    body = json.dumps(fields)
    return hashlib.sha256(body.encode()).hexdigest()


def _replay(existing: Turn, digest: str, session_id: uuid.UUID) -> Submitted:
    """The turn the key names; 422 for another request (a key reused on another session
    reveals nothing of that session's turn)."""
    if existing.session_id != session_id:
        raise InvalidRequest(
            "this Idempotency-Key was already used with a different request; use a new key",
            code="idempotency_key_reused",
        )
    if existing.request_hash != digest:
        raise InvalidRequest(
            "this Idempotency-Key was already used with a different request; use a new key",
            code="idempotency_key_reused",
            details={"turn_id": str(existing.id)},
        )
    return Submitted(existing, created=False)


def submit_turn(
    rt: Runtime,
    *,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    content: str,
    if_busy: IfBusy = "enqueue",
    idempotency_key: str | None = None,
    user: str | None = None,
    route: JsonObject | None = None,
    known: Turn | None = None,
    options: JsonObject | None = None,
) -> Submitted:
    """Store the turn (queued) and start it if the session is idle; the caller publishes.
    `user`: the turn's end user, when it names one (else the session's counts). `known`: the
    turn the Idempotency-Key names, when the caller has read it already (a replay).
    `options`: what the turn asks of its model calls (`turns.options.TurnOptions`)."""
    digest = request_hash(session_id, content, if_busy, user, route, options)
    if known is not None:
        return _replay(known, digest, session_id)
    ask = NewTurnSpec(content, if_busy, idempotency_key, digest, user, route, options)
    try:
        return _submit(rt, tenant_id, session_id, ask)
    except IntegrityError:
        # The same key raced in on another session: the winner's turn answers.
        if idempotency_key is None:
            raise
        with transaction(rt.db) as db:
            existing = repo.turn_by_idempotency_key(db, tenant_id, idempotency_key)
        if existing is None:
            raise
        return _replay(existing, digest, session_id)


def _submit(
    rt: Runtime, tenant_id: uuid.UUID, session_id: uuid.UUID, ask: NewTurnSpec
) -> Submitted:
    """Start the turn in one statement when the session is idle; otherwise store it under the
    session's lock. A key used meanwhile by another request fails the insert on its unique
    index (`submit_turn` then answers with that request's turn)."""
    with autocommit_connection(rt.engine) as db:
        started = new_turns.start_turn_if_idle(
            db,
            tenant_id=tenant_id,
            session_id=session_id,
            timeout_s=rt.settings.turn_timeout_s,
            content=ask.content,
            request_hash=ask.digest,
            traceparent=current_traceparent(),
            user=ask.user,
            route=ask.route,
            idempotency_key=ask.idempotency_key,
            options=ask.options,
        )
    match started:
        case new_turns.Started(turn=new):
            publish = step_ref(
                new.first_step_id, StepKind.MODEL, turn_id=new.id, session_id=session_id
            )
            return Submitted(new, created=True, publish=publish)
        case new_turns.NoSuchSession():
            raise NotFound(f"session {session_id} not found")
        case new_turns.SessionBusy():
            pass  # stored under the session's lock below
        case _:
            assert_never(started)
    return _submit_locked(rt, tenant_id, session_id, ask)


def _submit_locked(
    rt: Runtime, tenant_id: uuid.UUID, session_id: uuid.UUID, ask: NewTurnSpec
) -> Submitted:
    """A busy session: the turn stored under the session's lock."""
    content, if_busy, idempotency_key, digest = (
        ask.content,
        ask.if_busy,
        ask.idempotency_key,
        ask.digest,
    )
    with transaction(rt.db) as db:
        if not new_turns.lock_session(db, session_id, tenant_id):
            raise NotFound(f"session {session_id} not found")
        active = repo.active_turns(db, session_id)
        ended = _make_room(rt, db, session_id, [t.id for t in active], if_busy) if active else []
        # Nothing active now (an idle session, or everything interrupted): the turn starts at
        # once. Otherwise it queues.
        starts = not active or if_busy == "interrupt"
        turn = new_turns.insert_turn(
            db,
            tenant_id=tenant_id,
            session_id=session_id,
            start_timeout_s=rt.settings.turn_timeout_s if starts else None,
            content=content,
            idempotency_key=idempotency_key,
            request_hash=digest,
            traceparent=current_traceparent(),
            user=ask.user,
            route=ask.route,
            options=ask.options,
        )
        if starts:  # its user message and first model step were stored with it
            publish = step_ref(
                turn.first_step_id, StepKind.MODEL, turn_id=turn.id, session_id=session_id
            )
        elif not any(t.status == TurnStatus.RUNNING for t in active):
            # Queued behind turns none of which runs (a lost promotion, the reconciler's
            # case): the oldest queued one starts.
            publish = promote_next(rt, db, session_id)
        else:
            publish = []
    for done in ended:
        announce(rt, done)
    return Submitted(turn, created=True, publish=publish)


def _make_room(
    rt: Runtime, db: Db, session_id: uuid.UUID, active: list[uuid.UUID], if_busy: IfBusy
) -> list[Ended]:
    """What `if_busy` does about the session's `active` turns (ids, oldest first): leave them
    (`enqueue`), refuse the new turn (`reject`, 409), or cancel them (`interrupt`). Returns the
    turns it ended, to announce after the commit."""
    match if_busy:
        case "enqueue":
            return []
        case "reject":
            raise ConflictError(
                "the session is busy with another turn; retry later or use if_busy=enqueue",
                code="session_busy",
                details={"active_turn_id": str(active[0])},
            )
        case "interrupt":
            ended = []
            # Newest first, so ending the running turn promotes nothing already doomed.
            for turn_id in reversed(active):
                done, _ = end_turn(
                    rt, db, session_id=session_id, turn_id=turn_id, status=TurnStatus.CANCELLED
                )
                if done is not None:
                    ended.append(done)
            return ended
        case _:
            assert_never(if_busy)


def cancel_turn(
    rt: Runtime, *, tenant_id: uuid.UUID, turn_id: uuid.UUID
) -> tuple[Turn, list[NextStep]]:
    """Cancel a queued or running turn; a running model step stops at its next token."""
    with transaction(rt.db) as db:
        turn = repo.get_turn(db, turn_id, tenant_id=tenant_id)
        if turn is None:
            raise NotFound(f"turn {turn_id} not found")
        repo.get_session(db, turn.session_id, lock=True)
        done, publish = end_turn(
            rt, db, session_id=turn.session_id, turn_id=turn_id, status=TurnStatus.CANCELLED
        )
        if done is None:
            db.refresh(turn)
            raise ConflictError(
                f"turn {turn_id} has already ended ({turn.status}); nothing to cancel",
                code="turn_finished",
                details={"status": turn.status},
            )
        db.refresh(turn)
    announce(rt, done)
    return turn, publish
