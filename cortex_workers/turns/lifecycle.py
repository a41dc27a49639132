"""Starting and ending turns: promotion of the next queued turn, terminal status and events.

Lock order everywhere: session row, then turn rows, then step rows.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.orm import Session as Db

from ..messages import ErrorDoc, StepRestart, TurnDone, TurnError, Usage
from ..observability.metrics import observe_turn_finished
from ..runtime import Runtime
from ..store import repo
from ..store import steps as step_store
from ..store.db import transaction
from ..store.models import Turn
from ..store.step_commit import write_record
from ..store.step_record_rows import RecordRows, TimelineRow
from ..streaming import cancel_key, emit_terminal
from ..vocabulary import ACTIVE_TURN_STATUSES, StepKind, TimelineKind, TurnStatus
from .options import TurnOptions
from .steps import NextStep, step_ref


@dataclass(frozen=True, slots=True)
class Ended:
    """A turn that reached a terminal status in this transaction; announce it after commit."""

    turn_id: uuid.UUID
    status: TurnStatus
    input_tokens: int
    output_tokens: int
    cost_usd: float
    error: ErrorDoc | None
    """As stored on the turn: `{"code", "message"}`."""
    cut_off: tuple[int, int] | None = None
    """(step_no, attempt) of a model step that ended mid-stream: its partial text is void."""
    duration_s: float = 0.0
    """From the turn's creation to its end."""

    @classmethod
    def of(cls, db: Db, turn: Turn) -> Ended:
        ran = turn.finished_at - turn.created_at if turn.finished_at is not None else None
        return cls(
            turn.id,
            turn.status,
            turn.input_tokens,
            turn.output_tokens,
            float(turn.cost_usd),
            turn.error,
            step_store.cut_off_model_step(db, turn.id),
            ran.total_seconds() if ran is not None else 0.0,
        )

    def discard_event(self) -> StepRestart | None:
        """`step_restart` of the model step the end cut off, if one was."""
        if self.cut_off is None:
            return None
        return StepRestart(step=self.cut_off[0], attempt=self.cut_off[1])

    def error_event(self) -> TurnError | None:
        if self.error is None:
            return None
        return TurnError(code=self.error["code"], message=self.error["message"])

    def done_event(self) -> TurnDone:
        return TurnDone(
            status=self.status,
            usage=Usage(self.input_tokens, self.output_tokens),
            cost_usd=self.cost_usd,
        )

    def write_terminal_events(self, rt: Runtime) -> None:
        """Write the turn's terminal events (idempotent)."""
        emit_terminal(
            rt.redis,
            self.turn_id,
            done=self.done_event(),
            error=self.error_event(),
            discard=self.discard_event(),
            ttl_s=rt.settings.stream_ttl_s,
        )


def create_model_step(
    db: Db,
    *,
    turn_id: uuid.UUID,
    session_id: uuid.UUID,
    step_no: int,
    parent_step_id: uuid.UUID | None = None,
) -> list[NextStep]:
    """The turn's next model step, numbered among the session's model calls."""
    step_id = step_store.insert_step(
        db,
        turn_id=turn_id,
        step_no=step_no,
        kind=StepKind.MODEL,
        parent_step_id=parent_step_id,
        call_index=repo.next_model_call_index(db, session_id),
    )
    return step_ref(step_id, StepKind.MODEL, turn_id=turn_id, session_id=session_id)


def promote_next(rt: Runtime, db: Db, session_id: uuid.UUID) -> list[NextStep]:
    """Start the session's oldest queued turn if none is running. Caller holds the session lock."""
    active = repo.active_turns(db, session_id)
    if not active or any(t.status == TurnStatus.RUNNING for t in active):
        return []
    turn = repo.get_turn(db, active[0].id)
    if turn is None:  # not while the caller holds the session lock
        return []
    repo.start_turn(db, turn, timeout_s=rt.settings.turn_timeout_s)
    return first_step(
        db,
        turn_id=turn.id,
        session_id=session_id,
        content=None if turn.trigger is not None and not turn.content else turn.content,
        images=list(TurnOptions.of(turn.options).images),
    )


def first_step(
    db: Db,
    *,
    turn_id: uuid.UUID,
    session_id: uuid.UUID,
    content: str | None,
    images: list[str] | None = None,
) -> list[NextStep]:
    """A queued turn's user message (none for a turn no user posted: a follow-up) and first
    model step, as it starts."""
    if content is not None:
        repo.insert_message(
            db, session_id=session_id, role="user", content=content, turn_id=turn_id,
            images=images or None,
        )  # fmt: skip
    return create_model_step(db, turn_id=turn_id, session_id=session_id, step_no=1)


def end_turn(
    rt: Runtime,
    db: Db,
    *,
    session_id: uuid.UUID,
    turn_id: uuid.UUID,
    status: TurnStatus,
    error: ErrorDoc | None = None,
    answer: str | None = None,
) -> tuple[Ended | None, list[NextStep]]:
    """End an active turn, cancel its open steps and promote the next queued turn.

    Caller holds the session lock. Returns (None, []) when the turn had already ended.
    """
    turn = repo.end_turn(db, turn_id, status=status, error=error, answer=answer)
    if turn is None:
        return None, []
    step_store.cancel_open_steps(db, turn_id)
    return Ended.of(db, turn), promote_next(rt, db, session_id)


def fail_turn(
    rt: Runtime,
    *,
    turn_id: uuid.UUID,
    code: str,
    message: str,
    failed_step_id: uuid.UUID | None = None,
) -> tuple[Ended | None, list[NextStep]]:
    """Fail a turn visibly in its own transaction (after commit, call `announce`).

    `failed_step_id` is the step whose failure this is; it is marked `failed` with the error.
    """
    with transaction(rt.db) as db:
        turn = repo.get_turn(db, turn_id)
        if turn is None:
            return None, []
        repo.get_session(db, turn.session_id, lock=True)
        if failed_step_id is not None and turn.status == TurnStatus.RUNNING:
            step_store.fail_step(db, failed_step_id, error={"code": code, "message": message})
        if turn.status in ACTIVE_TURN_STATUSES:
            failure = TimelineRow(
                TimelineKind.FAILURE, {"code": code, "message": message}, None, datetime.now(UTC)
            )
            write_record(db, turn_id=turn_id, rows=RecordRows(events=(failure,)))
        return end_turn(
            rt,
            db,
            session_id=turn.session_id,
            turn_id=turn_id,
            status=TurnStatus.FAILED,
            error={"code": code, "message": message},
        )


def announce(rt: Runtime, ended: Ended | None) -> None:
    """Write the ended turn's `error` and `done` events (idempotent), and count the end.

    Called once per end, after the commit of the statement that ended the turn (an `Ended` is
    made only when that statement changed the row): a redelivery that finds the turn ended
    counts nothing."""
    if ended is None:
        return
    observe_turn_finished(ended.status, ended.duration_s)
    if ended.status == TurnStatus.CANCELLED:
        rt.redis.set(cancel_key(ended.turn_id), "1", ex=rt.settings.stream_ttl_s)
    ended.write_terminal_events(rt)
