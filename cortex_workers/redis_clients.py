"""The Redis clients of a process, for a plain URL or for the primary Redis Sentinel names
(`redis_target.SentinelTarget`).

While no primary is known, a command raises `MasterNotFoundError` (a `ConnectionError`): the API
answers 503 with `Retry-After`, as for any Redis outage.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio as aioredis
from redis import BlockingConnectionPool
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.sentinel import Sentinel, SentinelConnectionPool

from .redis_target import SentinelTarget

REPLICA_WAIT_MS = 500
"""How long a step waits, before its commit, for a replica to confirm its stream entries."""


class BlockingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
    """Connections to the primary the sentinels name, and a thread that finds every connection
    in use waits for one (up to `timeout`) as with `BlockingConnectionPool`, instead of failing
    with "too many connections"."""


def sync_pool(
    redis_url: str, target: SentinelTarget | None, **options: Any
) -> redis.ConnectionPool:
    """A connection pool for this process's threads: blocking on a plain URL (a thread waits
    for a free connection), managed by the sentinels otherwise (each new connection goes to
    the primary they name now)."""
    if target is None:
        return redis.BlockingConnectionPool.from_url(redis_url, **options)
    manager = Sentinel(  # type: ignore[no-untyped-call]
        list(target.sentinels), socket_timeout=options.get("socket_connect_timeout", 5)
    )
    return BlockingSentinelPool(  # type: ignore[no-untyped-call]
        target.master, manager, **target.connection_kwargs(), **options
    )


def async_client(redis_url: str, target: SentinelTarget | None, **options: Any) -> aioredis.Redis:
    """The API's asyncio client: from the URL, or the sentinels' current primary."""
    if target is None:
        return aioredis.Redis.from_url(redis_url, **options)
    manager = AsyncSentinel(  # type: ignore[no-untyped-call]
        list(target.sentinels), socket_timeout=options.get("socket_connect_timeout", 5)
    )
    client: aioredis.Redis = manager.master_for(
        target.master, **target.connection_kwargs(), **options
    )
    return client
