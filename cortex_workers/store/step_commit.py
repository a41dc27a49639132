"""A step ends with one statement: its ending (a reply, a release for a retry or a deferral,
the turn's failure, a tool result) and everything the step learned (`RecordRows`: timeline
events, audit rows, the spend of its calls, warnings, its route), all or, for the ending,
nothing: a step that is not ours any more writes its record only. See docs/architecture.md,
"The step".

The statement is assembled from the pieces of `store.commit_sql` for the parts a step has (a
variant per combination, built once and kept), and runs on the connection's psycopg cursor
(`sql.Precompiled`)."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from psycopg.types.json import Jsonb
from sqlalchemy import text

from ..vocabulary import ToolSeverity, TurnStatus
from . import commit_sql as sql
from . import record_sql
from .budget import Alert
from .commit_params import record_params, reply_params, tool_params
from .db import Executor
from .proposals import ProposalDoc
from .replies import Answer, ErrorDoc, ModelCallAudit, SessionCounters, TurnTotals, Usage
from .sql import Params, Precompiled
from .step_record_rows import (
    Parts,
    RecordRows,
    error_param,
    events_param,
)


@dataclass(frozen=True, slots=True)
class StepKey:
    """The step that ends, fenced by its attempt, and the ids every row it writes carries."""

    session_id: uuid.UUID
    turn_id: uuid.UUID
    step_id: uuid.UUID
    attempt: int
    tenant_id: uuid.UUID
    user: str | None = None
    """The turn's end user (usage rows are keyed by it)."""


@dataclass(frozen=True, slots=True)
class NewCall:
    """A tool call a reply asks for, and the tool step that runs it."""

    tool_call_id: uuid.UUID
    step_id: uuid.UUID
    step_no: int
    call_id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Reply:
    """A model step's answer, counted in its session and turn."""

    usage: Usage
    message: Answer
    audit: ModelCallAudit | None
    """The audit row of the call that answered (None: no call, the depth notice)."""
    model_steps: int
    """1 for a model call's reply; 0 for the depth cap's notice."""
    end: TurnStatus | None = None
    """The turn's end when the reply ends it (`done`, or `failed` past the depth cap)."""
    answer: str | None = None
    error: ErrorDoc | None = None
    summarize_window: int | None = None
    """With `end`: a summarize step when the session holds more messages than this beyond
    its summary."""
    calls: tuple[NewCall, ...] = ()


@dataclass(frozen=True, slots=True)
class Release:
    """The step back to pending: claimable after `delay_s`, as attempt `next_attempt`."""

    next_attempt: int
    delay_s: float
    error: ErrorDoc | None = None


@dataclass(frozen=True, slots=True)
class FailTurn:
    """The step failed and its turn with it."""

    error: ErrorDoc


@dataclass(frozen=True, slots=True)
class NewProposal:
    """The proposal of a `propose_action` call, stored with its result."""

    id: uuid.UUID
    ttl_s: float
    action: str
    product: str
    params: Mapping[str, Any]
    rationale: str
    blast_radius: str | None
    reversible: bool | None


@dataclass(frozen=True, slots=True)
class ToolDone:
    """A tool call's result (a tool step's, or an agent task's for the tool step it holds):
    the batch of the model step that asked for it has one call fewer open."""

    tool_call_id: uuid.UUID
    call_id: str
    name: str
    content: str
    is_error: bool
    truncated: bool
    severity: ToolSeverity
    error_kind: str | None
    latency_ms: int
    audit_input: Mapping[str, Any]
    audit_output: Mapping[str, Any]
    proposal: NewProposal | None = None
    images: tuple[str, ...] = ()
    """Images passed on with the result (`data:` URLs), stored on its `tool` message."""


Ending = Reply | Release | FailTurn | ToolDone | None


@dataclass(frozen=True, slots=True)
class Closed:
    """What the statement did. `owned`: the step was ours (its attempt, leased, its turn
    running); `went`: its ending was written (a `gated` ending that found a later turn waiting
    is owned but did not go). The record is written either way."""

    owned: bool
    went: bool
    session: SessionCounters | None = None
    turn: TurnTotals | None = None
    cut_off: tuple[int, int] | None = None
    summarize_step_id: uuid.UUID | None = None
    next_step_id: uuid.UUID | None = None
    """A tool result that completed its batch: the next model step."""
    proposal: ProposalDoc | None = None
    alerts: list[Alert] = field(default_factory=list)


_STATEMENTS: dict[tuple[Any, ...], Precompiled] = {}


def _statement(key: tuple[Any, ...], build: Any) -> Precompiled:
    found = _STATEMENTS.get(key)
    if found is None:
        found = _STATEMENTS[key] = Precompiled(text(build()))
    return found


def close_step(
    db: Executor,
    step: StepKey,
    ending: Ending,
    record: RecordRows,
    *,
    gated: bool = False,
    alert_pct: float = 80.0,
) -> Closed:
    """Write the step's ending and its record in one statement (see the module's doc)."""
    parts = record.parts
    params = record_params(step, record, alert_pct)
    match ending:
        case Reply():
            gated = gated and ending.end is not None
            shape = (ending.end is not None, bool(ending.calls), ending.audit is not None)
            statement = _statement(
                ("reply", shape, gated, parts), lambda: _reply(shape, gated, parts)
            )
            params.update(reply_params(ending))
        case FailTurn():
            statement = _statement(("fail", gated, parts), lambda: _fail(gated, parts))
            params["error"] = error_param(ending.error)
        case Release():
            statement = _statement(("release", parts), lambda: _release(parts))
            params.update(
                next_attempt=ending.next_attempt,
                delay_s=max(ending.delay_s, 0.0),
                error=None if ending.error is None else Jsonb(dict(ending.error)),
            )
        case ToolDone():
            proposed = ending.proposal is not None
            statement = _statement(("tool", proposed, parts), lambda: _tool(proposed, parts))
            params.update(tool_params(ending))
        case None:
            statement = _statement(("record", parts), lambda: _record_only(parts))
    row = statement.one(db, params)
    return closed_of(row)


def statement_texts() -> list[tuple[str, int]]:
    """Every variant of the statement as the driver receives it, with its number of
    parameters (for tests: each stays within what psycopg caches)."""
    from sqlalchemy.dialects.postgresql import psycopg

    dialect: Any = psycopg.dialect  # untyped in SQLAlchemy

    builders: list[Any] = []
    for parts in itertools.product((False, True), repeat=6):
        for shape in itertools.product((False, True), repeat=3):
            for gated in (False, True):
                builders.append(lambda p=parts, sh=shape, g=gated: _reply(sh, g, p))
        for gated in (False, True):
            builders.append(lambda p=parts, g=gated: _fail(g, p))
        builders.append(lambda p=parts: _release(p))
        builders.append(lambda p=parts: _record_only(p))
        for proposed in (False, True):
            builders.append(lambda p=parts, pr=proposed: _tool(pr, p))
    out = []
    for build in builders:
        compiled = text(build()).compile(dialect=dialect())
        out.append((compiled.string, len(compiled.binds)))
    return out


# --- the statements --------------------------------------------------------------------------


def _reply(shape: tuple[bool, bool, bool], gated: bool, parts: Parts) -> str:
    ending, calls, audited = shape
    s = sql.Statement()
    sql.session_locks(s, gated=gated)
    sql.reply(s, ending=ending, calls=calls, audited=audited, route=parts[5])
    return record_sql.record(s, parts, turn=True)


def _fail(gated: bool, parts: Parts) -> str:
    s = sql.Statement()
    sql.session_locks(s, gated=gated)
    sql.fail(s, route=parts[5])
    return record_sql.record(s, parts, turn=True)


def _release(parts: Parts) -> str:
    s = sql.Statement()
    sql.release(s, route=parts[5], warnings=parts[4])
    return record_sql.record(s, parts, turn=False)


def _tool(proposed: bool, parts: Parts) -> str:
    s = sql.Statement()
    sql.tool_result(s, proposal=proposed)
    return record_sql.record(s, parts, turn=False)


def _record_only(parts: Parts) -> str:
    s = sql.Statement()
    sql.no_ending(s)
    return record_sql.record(s, parts, turn=False)


def write_record(
    db: Executor, *, turn_id: uuid.UUID, rows: RecordRows, tenant_id: uuid.UUID | None = None
) -> None:
    """A record of something that is not a step's ending (a turn failed by the reconciler, an
    agent's handoff), with the same pieces: its timeline events, in order."""
    params: Params = {
        "session": None,
        "turn": turn_id,
        "step": None,
        "attempt": 0,
        "tenant": tenant_id,
        "user": None,
    }
    if rows.audits or rows.spends or rows.warnings or rows.route is not None:
        raise ValueError("a record without a step holds timeline events only")
    if not rows.events:
        return
    params["events"] = events_param(rows.events)
    statement = _statement(("record", rows.parts), lambda: _record_only(rows.parts))
    statement.one(db, params)


def closed_of(row: Any) -> Closed:
    fields = row._asdict()
    counts, turn = fields.get("session_counts"), fields.get("turn")
    cut_off = fields.get("cut_off")
    return Closed(
        owned=row.owned is not None,
        went=row.went is not None,
        session=None
        if counts is None
        else SessionCounters(
            counts["last_message_seq"], counts["summary_upto_seq"], counts["last_turn_seq"]
        ),
        turn=None if turn is None or "seq" not in turn else _totals(turn),
        cut_off=(cut_off[0], cut_off[1]) if cut_off else None,
        summarize_step_id=fields.get("summarize_step_id"),
        next_step_id=fields.get("next_step_id"),
        proposal=fields.get("proposal"),
        alerts=[Alert(a["key"], a["spent"], a["limit"]) for a in fields.get("alerts") or ()],
    )


class TurnTotalsDoc(TypedDict):
    """The ended turn's totals as the closing statement returns them."""

    id: str
    seq: int
    status: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    error: ErrorDoc | None


def _totals(turn: TurnTotalsDoc) -> TurnTotals:
    return TurnTotals(
        uuid.UUID(turn["id"]),
        turn["seq"],
        TurnStatus(turn["status"]),
        turn["input_tokens"],
        turn["output_tokens"],
        float(turn["cost_usd"]),
        turn["error"],
    )
