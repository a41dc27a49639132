"""Scheduled turns: a rule (a cron expression in a time zone, or a fixed period), the time of
its next firing, and the firing itself, which creates one turn per schedule and fire time.

Firing (`fire_due`, run every second by beat on the `maintenance` queue) takes one due
schedule at a time with `FOR UPDATE SKIP LOCKED`, stores its turn (started when the session is
idle, queued behind the active turn otherwise) and moves `next_run_at` past now, in one
transaction: two sweeps never fire the same time twice, and times missed while nothing ran
collapse into one firing. The turn's Idempotency-Key is `schedule:<id>:<fire time>`.

A fired turn passes the admission of a posted one before it is stored (the tenant's turns
per minute, the budgets, the session's token cap, the end user's hourly limit). A refused
firing stores nothing but its reason (`last_error`, shown by the schedule API) and the
schedule goes on.
"""

from __future__ import annotations

import logging
import math
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from sqlalchemy import func, select
from sqlalchemy.exc import InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session as Db

from ..budget import BudgetExhausted, UserRateLimited
from ..errors import ConflictError, CortexError, InvalidRequest, NotFound, QuotaExceeded
from ..providers.limits import Limit, RateLimiter
from ..runtime import Runtime
from ..store import new_turns, repo
from ..store import schedules as store
from ..store.db import transaction
from ..vocabulary import RateLimitKind, StepKind, TurnStatus
from .guards.admission import admit_turn
from .lifecycle import promote_next
from .steps import NextStep, step_ref
from .submit import request_hash

MAX_FIRINGS_PER_SWEEP = 200
MAX_EVERY_S = 366 * 86400
"""The longest period: a year (a rarer turn is a cron schedule)."""
RATE_LIMITED = "rate_limited"
"""The code of a firing refused for the tenant's turns per minute (the API's 429 code)."""
RETRY_FAILED_FIRING_S = 30.0
"""A firing that failed (not for want of the database) is tried again this much later."""
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Rule:
    """When a schedule fires: `cron` in `timezone`, or every `every_s` seconds."""

    cron: str | None = None
    timezone: str | None = None
    every_s: float | None = None


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise InvalidRequest(
            f"unknown time zone {name!r}; use an IANA name such as 'Europe/Paris'",
            code="invalid_schedule",
            details={"timezone": name},
        ) from None


def check_rule(rule: Rule) -> Rule:
    """The rule, with its time zone defaulted to UTC for a cron; `InvalidRequest` (422) when
    it is not exactly one valid cron expression or one period of at least a second."""
    if (rule.cron is None) == (rule.every_s is None):
        raise InvalidRequest(
            "give exactly one of cron and every_s", code="invalid_schedule", details=None
        )
    if rule.every_s is not None:
        if rule.timezone is not None:
            raise InvalidRequest("timezone applies to cron schedules only", code="invalid_schedule")
        if not math.isfinite(rule.every_s) or not 1 <= rule.every_s <= MAX_EVERY_S:
            raise InvalidRequest(
                f"every_s must be at least 1 second and at most {MAX_EVERY_S} (a year)",
                code="invalid_schedule",
                details={"every_s": rule.every_s},
            )
        return rule
    assert rule.cron is not None
    if len(rule.cron.split()) != 5 or not croniter.is_valid(rule.cron):
        raise InvalidRequest(
            f"invalid cron expression {rule.cron!r}: five fields, minute hour day month weekday",
            code="invalid_schedule",
            details={"cron": rule.cron},
        )
    zone = rule.timezone or "UTC"
    _zone(zone)
    checked = Rule(cron=rule.cron, timezone=zone)
    try:
        next_run(checked, now=datetime.now(UTC))
    except (ValueError, TypeError, OverflowError):  # e.g. "0 0 31 2 *": no such day
        raise InvalidRequest(
            f"cron expression {rule.cron!r} never fires",
            code="invalid_schedule",
            details={"cron": rule.cron},
        ) from None
    return checked


def next_run(rule: Rule, *, now: datetime, previous: datetime | None = None) -> datetime:
    """The first fire time after `now`. A period keeps its grid from `previous` (the time
    that just fired), skipping the slots already past; a cron is read in its time zone."""
    if rule.every_s is not None:
        period = timedelta(seconds=rule.every_s)
        if previous is None:
            return now + period
        missed = math.floor((now - previous) / period)
        return previous + period * max(1, missed + 1)
    assert rule.cron is not None and rule.timezone is not None
    local = now.astimezone(_zone(rule.timezone))
    fire: datetime = croniter(rule.cron, local).get_next(datetime)
    return fire.astimezone(UTC)


def create_schedule(
    rt: Runtime, *, tenant_id: uuid.UUID, session_id: uuid.UUID, content: str, rule: Rule
) -> store.Schedule:
    """Store a schedule of the tenant's session; `NotFound` without such a session."""
    rule = check_rule(rule)
    if rule.every_s is not None and rule.every_s < rt.settings.schedule_min_every_s:
        floor = rt.settings.schedule_min_every_s
        raise InvalidRequest(
            f"every_s must be at least {floor:g} seconds on this server",
            code="invalid_schedule",
            details={"every_s": rule.every_s, "min_every_s": floor},
        )
    with transaction(rt.db) as db:
        if repo.get_session(db, session_id, tenant_id=tenant_id) is None:
            raise NotFound(f"session {session_id} not found")
        held = db.execute(
            select(func.count())
            .select_from(store.Schedule)
            .where(store.Schedule.tenant_id == tenant_id)
        ).scalar_one()
        if held >= rt.settings.tenant_max_schedules:
            raise QuotaExceeded(
                f"this tenant has {held} schedules, the most it may have; delete one first",
                details={"quota": "schedules", "limit": rt.settings.tenant_max_schedules},
            )
        now = db.execute(select(func.now())).scalar_one()
        return store.insert_schedule(
            db,
            tenant_id=tenant_id,
            session_id=session_id,
            content=content,
            cron=rule.cron,
            timezone=rule.timezone,
            every_s=rule.every_s,
            next_run_at=next_run(rule, now=now),
        )


def fire_due(rt: Runtime, *, limit: int = MAX_FIRINGS_PER_SWEEP) -> list[NextStep]:
    """Fire every due schedule, one transaction each; returns the steps to publish."""
    publish: list[NextStep] = []
    for _ in range(limit):
        with transaction(rt.db) as db:
            due = store.claim_due(db, limit=1)
            if not due:
                break
            publish += _fire_or_defer(rt, db, due[0])
    return publish


def _fire_or_defer(rt: Runtime, db: Db, schedule: store.Schedule) -> list[NextStep]:
    """`_fire` in a savepoint; if it fails, the schedule is tried again a little later, so
    that one bad schedule (always the most overdue) cannot stop the others."""
    try:
        with db.begin_nested():
            return _fire(rt, db, schedule)
    except (CortexError, SQLAlchemyError, ValueError, TypeError, KeyError) as exc:
        if isinstance(exc, OperationalError | InterfaceError):
            raise  # the database itself: the next sweep tries again
        log.exception("schedule %s could not fire; trying again later", schedule.id)
        later = datetime.now(UTC) + timedelta(seconds=RETRY_FAILED_FIRING_S)
        store.defer(db, schedule.id, until=later)
        return []


def _fire(rt: Runtime, db: Db, schedule: store.Schedule) -> list[NextStep]:
    now = db.execute(select(func.now())).scalar_one()
    fire_time = schedule.next_run_at
    key = f"schedule:{schedule.id}:{fire_time.astimezone(UTC).isoformat()}"
    publish: list[NextStep] = []
    existing = repo.turn_by_idempotency_key(db, schedule.tenant_id, key)
    if existing is not None:  # this time already fired (cannot happen while rows are locked)
        turn_id = existing.id
    elif not new_turns.lock_session(db, schedule.session_id, schedule.tenant_id):
        raise NotFound(f"session {schedule.session_id} not found")  # the row cascades away
    elif (refused := _refusal(rt, schedule, now=now)) is not None:
        error, until = refused
        store.refuse(db, schedule.id, error=error, next_run_at=until)
        return []
    else:
        turn_id, publish = _store_turn(rt, db, schedule, key)
    store.mark_fired(
        db, schedule.id, fired_at=now, turn_id=turn_id, next_run_at=_next(schedule, now=now)
    )
    return publish


def _next(schedule: store.Schedule, *, now: datetime) -> datetime:
    """The fire time after the one now firing (or refused)."""
    rule = Rule(cron=schedule.cron, timezone=schedule.timezone, every_s=schedule.every_s)
    return next_run(rule, now=now, previous=schedule.next_run_at)


def _refusal(
    rt: Runtime, schedule: store.Schedule, *, now: datetime
) -> tuple[store.RefusalDoc, datetime] | None:
    """The admission of `POST /v1/sessions/{id}/turns`, in the same order, before the turn
    is stored: the tenant's turns per minute (a full window: the firing waits for it), then
    the daily budgets, the session's token cap and the end user's hourly limit (refused: the
    schedule goes on at its next fire time). None when the turn may be stored."""
    at = now.astimezone(UTC).isoformat()
    if (wait := _turn_limit_wait(rt, schedule.tenant_id)) is not None:
        message = (
            f"the tenant's {rt.settings.tenant_turns_per_minute} turns per minute are taken; "
            f"this firing waits {wait:.0f} s"
        )
        error: store.RefusalDoc = {"code": RATE_LIMITED, "message": message, "at": at}
        return error, now + timedelta(seconds=wait)
    try:
        admit_turn(
            rt,
            tenant_id=schedule.tenant_id,
            session_id=schedule.session_id,
            content=schedule.content,
            user=None,
        )
    except (BudgetExhausted, ConflictError, UserRateLimited) as refused:
        error = {"code": refused.code, "message": refused.message, "at": at}
        return error, _next(schedule, now=now)
    return None


def _turn_limit_wait(rt: Runtime, tenant_id: uuid.UUID) -> float | None:
    """Take one unit of the tenant's turns per minute (the API's scope, `api.ratelimit`): a
    fired turn counts as a posted one; the seconds to wait when the window is full."""
    per_minute = rt.settings.tenant_turns_per_minute
    if not per_minute:
        return None
    limiter = RateLimiter(rt.redis, window_s=60.0)
    grant = limiter.acquire([Limit(f"tenant:{tenant_id}:turns", RateLimitKind.RPM, per_minute, 1)])
    return None if grant.granted else max(1.0, grant.wait_s)


def _store_turn(
    rt: Runtime, db: Db, schedule: store.Schedule, key: str
) -> tuple[uuid.UUID, list[NextStep]]:
    """The schedule's turn, stored under the session's lock: started when the session is
    idle, queued behind its active turn otherwise."""
    active = repo.active_turns(db, schedule.session_id)
    turn = new_turns.insert_turn(
        db,
        tenant_id=schedule.tenant_id,
        session_id=schedule.session_id,
        start_timeout_s=None if active else rt.settings.turn_timeout_s,
        content=schedule.content,
        idempotency_key=key,
        request_hash=request_hash(schedule.session_id, schedule.content, "enqueue"),
    )
    if not active:
        ref = step_ref(
            turn.first_step_id, StepKind.MODEL, turn_id=turn.id, session_id=schedule.session_id
        )
        return turn.id, ref
    if not any(t.status == TurnStatus.RUNNING for t in active):
        return turn.id, promote_next(rt, db, schedule.session_id)
    return turn.id, []
