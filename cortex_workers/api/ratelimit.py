"""Per-tenant limits on submissions (turns and sessions), shared by every API replica.

Each limit is a sliding window of one minute kept in Redis by the same Lua limiter the workers
use for provider limits (`providers.limits.RateLimiter`), so N API replicas together never
accept more than the limit in any 60 s. A refused request raises `RateLimited`, which the app
answers 429 in the error shape, with `details.retry_after_s` and a `Retry-After` header (whole
seconds, at least 1).

What counts: every authenticated, well-formed submission that reaches the route, whatever its
outcome (a 404 or 409 after the limit was taken still used one unit), except the replay of an
`Idempotency-Key` the tenant already used: that creates nothing, so it is never refused here
(its turn, or its 422 for another body, is answered as usual).

Redis down: the limiter's `ConnectionError`/`TimeoutError` propagates, and the app answers 503.
"""

from __future__ import annotations

import math
import uuid

from ..providers.limits import Limit, RateLimiter
from ..runtime import Runtime
from ..vocabulary import RateLimitKind
from .errors import RateLimited

WINDOW_S = 60.0
"""The window a `*_per_minute` limit is counted over."""


def turn_scope(tenant_id: uuid.UUID) -> str:
    """The limiter scope of a tenant's turn submissions."""
    return f"tenant:{tenant_id}:turns"


def session_scope(tenant_id: uuid.UUID) -> str:
    """The limiter scope of a tenant's session creations."""
    return f"tenant:{tenant_id}:sessions"


def _take(rt: Runtime, scope: str, per_minute: int | None, what: str) -> None:
    """One unit from `scope`'s window, or `RateLimited`; nothing to take when unlimited."""
    if not per_minute:
        return
    limiter = RateLimiter(rt.redis, window_s=WINDOW_S)
    grant = limiter.acquire([Limit(scope, RateLimitKind.RPM, per_minute, 1)])
    if grant.granted:
        return
    retry_after = max(1, math.ceil(grant.wait_s))
    raise RateLimited(
        f"too many {what}: this API key's tenant may submit {per_minute} per minute; "
        f"retry in {retry_after} s",
        retry_after_s=retry_after,
        limit_per_minute=per_minute,
    )


def take_turn(rt: Runtime, tenant_id: uuid.UUID) -> None:
    """Count one turn submission of `tenant_id`; `RateLimited` when over its limit. (A replay
    of an Idempotency-Key creates nothing and is not counted: the caller does not call this.)"""
    per_minute = rt.settings.tenant_turns_per_minute
    if not per_minute:
        return
    _take(rt, turn_scope(tenant_id), per_minute, "turns")


def take_job(rt: Runtime, tenant_id: uuid.UUID) -> None:
    """Count one job submission of `tenant_id`; `RateLimited` when over its limit."""
    _take(rt, f"tenant:{tenant_id}:jobs", rt.settings.tenant_jobs_per_minute, "jobs")


def take_batch(rt: Runtime, tenant_id: uuid.UUID) -> None:
    """Count one batch submission of `tenant_id`; `RateLimited` when over its limit."""
    _take(rt, f"tenant:{tenant_id}:batches", rt.settings.tenant_batches_per_minute, "batches")


def take_session(rt: Runtime, tenant_id: uuid.UUID) -> None:
    """Count one session creation of `tenant_id`; `RateLimited` when over its limit."""
    _take(rt, session_scope(tenant_id), rt.settings.tenant_sessions_per_minute, "sessions")
