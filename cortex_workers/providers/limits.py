"""Limits shared by every worker through Redis: request/token rate limits, and cool-downs.

Rate limits are sliding windows kept as sorted sets (one entry per grant, weighted), checked and
taken in one Lua script, so N workers contending for a limit never exceed it in any window of
its length. Time is Redis's own clock, the same for every worker.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import redis

from ..keys import cooldown_key, failures_key, rate_key
from ..stream_writer import Outcome, PipelinedWriter
from ..vocabulary import RateLimitKind

WINDOW_S = 60.0

# KEYS: one sorted set per limit. ARGV: window_ms, member, then (limit, weight) per key.
# Returns {1, 0, now_ms} when granted (and recorded), else {0, ms until it could be, now_ms}.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
local wait = 0
for i, key in ipairs(KEYS) do
  local limit = tonumber(ARGV[1 + 2 * i])
  local weight = tonumber(ARGV[2 + 2 * i])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local entries = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  local used = 0
  for j = 1, #entries, 2 do
    used = used + tonumber(string.match(entries[j], ':(%d+)$'))
  end
  if used > 0 and used + weight > limit then
    local freed = 0
    local until_ms = window
    for j = 1, #entries, 2 do
      freed = freed + tonumber(string.match(entries[j], ':(%d+)$'))
      if used - freed + weight <= limit then
        until_ms = tonumber(entries[j + 1]) + window - now
        break
      end
    end
    if until_ms > wait then wait = until_ms end
  end
end
if wait > 0 then return {0, wait, now} end
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[2] .. ':' .. ARGV[2 + 2 * i])
  redis.call('PEXPIRE', key, window)
end
return {1, 0, now}
"""

_RECORD = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1] .. ':' .. ARGV[2])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
"""


@dataclass(frozen=True, slots=True)
class Limit:
    """One limit to take from: `scope` is `provider` or `provider:model` (or a tenant's
    submissions, see `api.ratelimit`)."""

    scope: str
    kind: RateLimitKind
    limit: int
    """Units allowed per window."""
    weight: int
    """Units this grant takes: 1 for a request, the estimated tokens for a token limit."""


@dataclass(frozen=True, slots=True)
class Grant:
    granted: bool
    wait_s: float
    """When not granted: seconds until it could be."""
    at_ms: int = 0
    """Redis's clock when the decision was taken."""


class RateLimiter:
    """Takes requests and tokens from shared sliding windows."""

    def __init__(self, client: redis.Redis, *, window_s: float = WINDOW_S) -> None:
        self._client = client
        self._window_ms = int(window_s * 1000)
        self._acquire = client.register_script(_ACQUIRE)
        self._record = client.register_script(_RECORD)

    def acquire(self, limits: list[Limit]) -> Grant:
        """All of `limits` at once, or none of them."""
        limits = [lim for lim in limits if lim.weight > 0]
        if not limits:
            return Grant(True, 0.0)
        args: list[str | int] = [self._window_ms, uuid.uuid4().hex]
        for lim in limits:
            args += [lim.limit, lim.weight]
        granted, wait_ms, now_ms = self._acquire(
            keys=[rate_key(lim.scope, lim.kind) for lim in limits], args=args
        )
        return Grant(bool(granted), int(wait_ms) / 1000, int(now_ms))

    def record(self, scope: str, kind: RateLimitKind, amount: int) -> None:
        """Count usage that was only known afterwards (a call's output tokens)."""
        if amount > 0:
            self._record(
                keys=[rate_key(scope, kind)], args=[uuid.uuid4().hex, amount, self._window_ms]
            )


@dataclass(frozen=True, slots=True)
class Cooldown:
    provider: str
    seconds_left: float
    reason: str


class Health:
    """Counts a provider's retryable failures; too many in a window cool it down for a while,
    and while it cools down every worker routes around it."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        after_failures: int,
        window_s: float,
        cooldown_s: float,
        writer: PipelinedWriter | None = None,
    ) -> None:
        self._client = client
        self._writer = writer
        self._after = after_failures
        self._window_s = window_s
        self._cooldown_s = cooldown_s

    def record_failure(self, provider: str, reason: str) -> bool:
        """Count one failure; True when this one started a cool-down."""
        key = failures_key(provider)
        now = float(self._client.time()[0])
        pipe = self._client.pipeline()
        pipe.zadd(key, {uuid.uuid4().hex: now})
        pipe.zremrangebyscore(key, "-inf", now - self._window_s)
        pipe.zcard(key)
        pipe.expire(key, int(self._window_s) + 1)
        count = pipe.execute()[2]
        if count < self._after:
            return False
        started = bool(
            self._client.set(
                cooldown_key(provider),
                f"{count} failures; last: {reason}"[:500],
                ex=max(1, int(self._cooldown_s)),
                nx=True,
            )
        )
        self._client.delete(key)
        return started

    def record_success(self, provider: str) -> None:
        """Reset the failure count. With a `writer`, the reset is pipelined: the step does not
        wait for it (were it lost, a later cool-down would start one failure early)."""
        if self._writer is None:
            self._client.delete(failures_key(provider))
        else:
            self._writer.send(Outcome(), "DEL", failures_key(provider))

    def cooling(self, providers: list[str]) -> dict[str, Cooldown]:
        """Which of `providers` are cooling down now."""
        if not providers:
            return {}
        pipe = self._client.pipeline()
        for name in providers:
            pipe.get(cooldown_key(name))
            pipe.pttl(cooldown_key(name))
        replies = pipe.execute()
        out = {}
        for i, name in enumerate(providers):
            reason, ttl = replies[2 * i], replies[2 * i + 1]
            if reason is not None and ttl and ttl > 0:
                text = reason.decode() if isinstance(reason, bytes) else str(reason)
                out[name] = Cooldown(name, ttl / 1000, text)
        return out
