"""What a step learned while it ran, as the closing statement writes it (`store.step_commit`):
timeline events, audit rows of failed calls, the spend of each provider call (its reservation
settled, or its usage row, and the counters it moves), warnings and the step's route.

Pure values: the step collects them in memory (`turns.step_record`) and writes them all at
once, with the step's result."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from psycopg.types.json import Jsonb

from ..vocabulary import DecisionKind, TimelineKind
from .replies import ErrorDoc

Parts = tuple[bool, bool, bool, bool, bool, bool]
"""Which parts a record has: events, audit rows, spends that held a reservation, spends that
held none (usage rows), warnings, a route."""

SpendCase = Literal["settled", "corrected", "used"]
"""Which of a spend's counter moves apply: its reservation settled now, its reservation
settled earlier by the reconciler and corrected down now, or a usage row stored now (a call
that held no reservation)."""


@dataclass(frozen=True, slots=True)
class TimelineRow:
    """One timeline event (`store.timeline`)."""

    kind: TimelineKind
    data: Mapping[str, Any]
    step: int | None
    at: datetime
    ending: bool = False
    """Written only when the step's ending is (a `completion`, a `failure`)."""


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One `decisions` row of the step's own ids and attempt."""

    kind: DecisionKind
    name: str
    is_error: bool = False
    latency_ms: int | None = None
    input: Mapping[str, Any] | None = None
    output: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class CounterMove:
    """What one counter gains: `reserved` and `spent`, in micro-dollars (tokens for a
    session's)."""

    key: str
    start: datetime
    resets_at: datetime | None
    reserved: int
    spent: int


@dataclass(frozen=True, slots=True)
class Spend:
    """One provider call's cost, as the closing statement settles it."""

    id: uuid.UUID
    """The reservation's id when `held`, else the id of the usage row to store."""
    held: bool
    call_no: int
    provider: str
    model: str
    amount_micros: int
    """What the call held (or would have held): its maximum cost."""
    tokens: int
    cost_micros: int | None
    """Its real cost; None: it did not finish, it costs what it held."""
    input_tokens: int | None
    output_tokens: int | None
    by: str
    """`call` or `failure`."""
    day_start: datetime
    moves: Mapping[SpendCase, tuple[CounterMove, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Warning:
    """A warning on the turn (`turns.warnings`)."""

    code: str
    message: str
    step: int


@dataclass(frozen=True, slots=True)
class RecordRows:
    """Everything the step learned, for its closing statement."""

    events: tuple[TimelineRow, ...] = ()
    audits: tuple[AuditRow, ...] = ()
    spends: tuple[Spend, ...] = ()
    warnings: tuple[Warning, ...] = ()
    route: Mapping[str, Any] | None = None
    redactions: Mapping[str, int] | None = None

    @property
    def parts(self) -> Parts:
        """Which parts the statement needs (its variant)."""
        return (
            bool(self.events),
            bool(self.audits),
            any(s.held for s in self.spends),
            any(not s.held for s in self.spends),
            bool(self.warnings),
            self.route is not None or self.redactions is not None,
        )


def _json(value: Any) -> str:
    return json.dumps(value, default=str)


def events_param(rows: tuple[TimelineRow, ...]) -> Jsonb:
    return Jsonb(
        [
            {
                "n": n,
                "step": r.step,
                "kind": r.kind.value,
                "data": json.loads(_json(r.data)),
                "at": r.at.isoformat(),
                "ending": r.ending,
            }
            for n, r in enumerate(rows)
        ]
    )


def audits_param(rows: tuple[AuditRow, ...]) -> Jsonb:
    return Jsonb(
        [
            {
                "kind": r.kind.value,
                "name": r.name,
                "is_error": r.is_error,
                "latency_ms": r.latency_ms,
                "input": None if r.input is None else json.loads(_json(r.input)),
                "output": None if r.output is None else json.loads(_json(r.output)),
            }
            for r in rows
        ]
    )


def spends_param(rows: tuple[Spend, ...]) -> Jsonb:
    return Jsonb(
        [
            {
                "id": str(s.id),
                "held": s.held,
                "call_no": s.call_no,
                "provider": s.provider,
                "model": s.model,
                "amount": s.amount_micros,
                "tokens": s.tokens,
                "cost": s.cost_micros,
                "input_tokens": s.input_tokens,
                "output_tokens": s.output_tokens,
                "by": s.by,
                "day_start": s.day_start.isoformat(),
            }
            for s in rows
        ]
    )


def moves_param(rows: tuple[Spend, ...]) -> Jsonb:
    return Jsonb(
        [
            {
                "id": str(s.id),
                "happens": case,
                "key": m.key,
                "start": m.start.isoformat(),
                "resets": m.resets_at.isoformat() if m.resets_at is not None else None,
                "reserved": m.reserved,
                "spent": m.spent,
            }
            for s in rows
            for case, moves in s.moves.items()
            for m in moves
        ]
    )


def warnings_param(rows: tuple[Warning, ...]) -> Jsonb:
    return Jsonb([{"code": w.code, "message": w.message, "step": w.step} for w in rows])


def error_param(error: ErrorDoc | None) -> Jsonb | None:
    return None if error is None else Jsonb(dict(error))
