"""Open event streams keep to what their credential allows: every `stream_recheck_s` the
credential is checked again (an API key revoked, a session token expired), and a stream whose
credential no longer holds ends with an `error` event. A tenant holds at most
`tenant_max_streams` streams open at once across API replicas (429 `quota_exceeded`)."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import redis.asyncio as aioredis
from fastapi import HTTPException, Request
from redis.exceptions import RedisError
from sse_starlette import ServerSentEvent

from ..errors import QuotaExceeded
from ..runtime import Runtime
from .deps import key_tenant
from .session_tokens import InvalidToken, looks_like_token, verify

log = logging.getLogger(__name__)

Check = Callable[[], Awaitable[str | None]]
"""Why the stream must end now (None: its credential still holds)."""
_END = object()
RELEASE_TIMEOUT_S = 2.0
"""The longest a closing stream waits to give its slot back (then it lapses by itself)."""


def credential_check(rt: Runtime, request: Request) -> Check:
    """Checks the request's credential again: the API key against the database (no cache),
    the session token's signature and expiry."""
    header = request.headers.get("authorization") or ""
    credential = header.partition(" ")[2].strip() or request.query_params.get("token") or ""

    async def check() -> str | None:
        if looks_like_token(credential):
            secret = rt.settings.session_token_secret()
            try:
                verify(secret or b"", credential)
            except InvalidToken as exc:
                return f"the session token no longer holds: {exc}"
            return None
        try:
            await key_tenant(rt, credential)  # the API's key cache (a few seconds), then the DB
        except HTTPException:
            return "the API key was revoked"
        return None

    return check


async def rechecked(
    events: AsyncIterator[Any],
    check: Check,
    *,
    every_s: float,
    hold: Callable[[], Awaitable[None]] | None = None,
) -> AsyncIterator[Any]:
    """`events`, ended with an `error` event (`credential_revoked`) once `check` fails;
    `hold` is called at each check (the stream's place in the tenant's quota)."""
    queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=1)

    async def pump() -> None:
        try:
            async for event in events:
                await queue.put(event)
        finally:
            await queue.put(_END)

    task = asyncio.create_task(pump())
    next_check = time.monotonic() + every_s
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), max(0.0, next_check - time.monotonic()))
            except TimeoutError:
                item = None
            if time.monotonic() >= next_check:
                problem = await check()
                if problem is not None:
                    data = {"code": "credential_revoked", "message": problem}
                    yield ServerSentEvent(data=json.dumps(data), event="error")
                    return
                if hold is not None:
                    try:
                        await hold()
                    except (RedisError, OSError):  # Redis went away: end, the client resumes
                        log.warning("stream ended: its quota slot could not be renewed")
                        return
                next_check = time.monotonic() + every_s
            if item is _END:
                return
            if item is not None:
                yield item
    finally:
        task.cancel()


class StreamSlots:
    """A tenant's open streams: a sorted set of stream ids scored by their last check; a
    stream not checked for three periods (its API process died) no longer counts."""

    def __init__(self, client: aioredis.Redis, tenant_id: uuid.UUID, every_s: float) -> None:
        self.client, self.key = client, f"cortex:streams:{tenant_id}"
        self.id, self.every_s = uuid.uuid4().hex, every_s

    async def take(self, limit: int) -> None:
        """Hold a slot, or `QuotaExceeded` (429) when the tenant holds `limit` already."""
        if not limit:
            return
        now = time.time()
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.zremrangebyscore(self.key, "-inf", now - 3 * self.every_s)
            pipe.zcard(self.key)
            _, held = await pipe.execute()
        if held >= limit:
            raise QuotaExceeded(  # a slot frees when a stream closes, or lapses (three periods)
                f"this tenant holds {limit} open event streams, the most it may; close one",
                details={"quota": "streams", "limit": limit},
                retry_after_s=max(1, math.ceil(3 * self.every_s)),
            )
        await self.hold()

    async def hold(self) -> None:
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.zadd(self.key, {self.id: time.time()})
            pipe.expire(self.key, int(6 * self.every_s) + 60)
            await pipe.execute()

    async def release(self) -> None:
        """Give the slot back; with Redis gone it lapses by itself (three periods). A stream
        whose client left ends by cancellation: the release is shielded from it, or every
        await in it would be cancelled too and the slot held until it lapses."""
        try:
            with anyio.move_on_after(RELEASE_TIMEOUT_S, shield=True):
                await self.client.zrem(self.key, self.id)
        except (RedisError, OSError):
            log.warning("stream slot not released (Redis unreachable); it lapses by itself")
