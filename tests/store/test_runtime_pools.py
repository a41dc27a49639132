"""A worker runs many threads (the llm and tools pools) over small connection pools: a thread
waits for a free Redis connection instead of failing."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from support import Stack

pytestmark = pytest.mark.servers


def test_more_threads_than_redis_connections_wait_for_one(stack: Stack) -> None:
    from cortex_workers.runtime import Runtime
    from cortex_workers.settings import get_settings

    rt = Runtime(get_settings().model_copy(update={"redis_pool_size": 2}))
    try:

        def hold(i: int) -> int:
            # BLPOP holds its connection for 0.2 s: 16 of them need 8 rounds of the 2 slots
            rt.redis.blpop([f"cortex:test:pool:{i}"], timeout=0.2)
            return i

        with ThreadPoolExecutor(16) as pool:
            assert sorted(pool.map(hold, range(16))) == list(range(16))
    finally:
        rt.close()
