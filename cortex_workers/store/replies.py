"""Storing a model step's reply, in one statement (`store.reply_statement`) that checks the
step is still ours, then stores the whole reply, or nothing of it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, TypedDict

from ..vocabulary import TurnStatus
from .db import Executor
from .reply_statement import STATEMENTS, ReplyParams


class ToolCallDoc(TypedDict):
    """A tool call as an assistant message stores it."""

    id: str
    name: str
    arguments: dict[str, Any]


class ErrorDoc(TypedDict):
    """Why a turn failed, as its `error` column and the `error` event carry it."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class Usage:
    """The model step's usage, set on its row as it finishes."""

    provider: str
    model: str
    fallback_from: str | None
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float
    latency_ms: int


@dataclass(frozen=True, slots=True)
class Answer:
    """The assistant message; its session, turn, step and seq are the statement's own."""

    id: uuid.UUID
    content: str
    tool_calls: list[ToolCallDoc] | None


@dataclass(frozen=True, slots=True)
class ModelCallAudit:
    """The audit row of the model call; its session, turn, step, attempt and latency are the
    statement's own."""

    tenant_id: uuid.UUID
    name: str
    """`provider:model`."""
    input: dict[str, Any]
    output: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SessionCounters:
    last_message_seq: int
    summary_upto_seq: int
    last_turn_seq: int


@dataclass(frozen=True, slots=True)
class TurnTotals:
    """The turn after the reply was counted in it (and, maybe, it ended)."""

    id: uuid.UUID
    seq: int
    status: TurnStatus
    input_tokens: int
    output_tokens: int
    cost_usd: float
    error: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Stored:
    """What the statement did. Not `owned`: the turn is no longer running or a newer attempt
    owns the step, and nothing was stored. `owned` but no `turn`: a gated statement found a
    later turn waiting and stored nothing."""

    owned: bool
    session: SessionCounters | None = None
    turn: TurnTotals | None = None
    cut_off: tuple[int, int] | None = None
    """(step_no, attempt) of a claimed model step the turn's end cancelled."""
    summarize_step_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """A model step's reply, as the statement stores it."""

    session_id: uuid.UUID
    turn_id: uuid.UUID
    step_id: uuid.UUID
    attempt: int
    input_tokens: int
    output_tokens: int
    cost: float
    model_steps: int
    usage: Usage
    message: Answer
    audit: ModelCallAudit | None
    """None stores no audit row."""
    end: TurnStatus | None = None
    """The turn's terminal status when this reply ends it."""
    answer: str | None = None
    error: ErrorDoc | None = None
    summarize_window: int | None = None
    """With `end`: add a summarize step when the session holds more messages than this
    beyond its summary."""


def _binds(reply: Reply) -> ReplyParams:
    """The statement's parameters for `reply`."""
    u, m = reply.usage, reply.message
    params = ReplyParams(
        session=reply.session_id,
        turn=reply.turn_id,
        step=reply.step_id,
        attempt=reply.attempt,
        add_input=reply.input_tokens,
        add_output=reply.output_tokens,
        add_cost=reply.cost,
        add_model_steps=reply.model_steps,
        provider=u.provider,
        model=u.model,
        fallback_from=u.fallback_from,
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cache_read_tokens=u.cache_read_tokens,
        cache_write_tokens=u.cache_write_tokens,
        cost_usd=u.cost_usd,
        latency_ms=u.latency_ms,
        message_id=m.id,
        content=m.content,
        tool_calls=m.tool_calls,
    )
    if (a := reply.audit) is not None:
        params["tenant_id"], params["call_name"] = a.tenant_id, a.name
        params["call_input"], params["call_output"] = a.input, a.output
    if reply.end is not None:
        params["status"], params["answer"], params["error"] = reply.end, reply.answer, reply.error
        params["summarize_step_id"] = uuid.uuid4()
        params["summarize"] = reply.summarize_window is not None
        params["window"] = reply.summarize_window or 0
    return params


def store_reply(db: Executor, reply: Reply, *, gated: bool = False) -> Stored:
    """Store `reply` in one statement (see the module's doc)."""
    ending = reply.end is not None
    statement = STATEMENTS[(ending, reply.audit is not None, gated and ending)]
    row = statement.first(db, _binds(reply))
    if row is None:
        return Stored(owned=False)
    if row.id is None:
        return Stored(owned=True)
    return Stored(
        owned=True,
        session=SessionCounters(row.last_message_seq, row.summary_upto_seq, row.last_turn_seq),
        turn=TurnTotals(
            row.id,
            row.seq,
            TurnStatus(row.status),
            row.input_tokens,
            row.output_tokens,
            float(row.cost_usd),
            row.turn_error,
        ),
        cut_off=(row.cut_off[0], row.cut_off[1]) if ending and row.cut_off else None,
        summarize_step_id=row.summarize_step_id if ending else None,
    )
