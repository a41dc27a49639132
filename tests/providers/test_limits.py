"""Shared limits on real Redis: no window ever exceeds a rate limit; failing providers cool down."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
import redis
from support import Stack, wait_until

from cortex_workers.keys import failures_key
from cortex_workers.providers.limits import Health, Limit, RateLimiter
from cortex_workers.stream_writer import PipelinedWriter

pytestmark = pytest.mark.servers


@pytest.fixture
def client(stack: Stack) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(stack.redis_url)
    yield c
    c.close()


def _contend(
    stack: Stack, *, workers: int, seconds: float, limit: Limit, window_s: float
) -> list[int]:
    """`workers` threads, each with its own connection, take from one limit as fast as they can;
    returns Redis's timestamps (ms) of the grants."""
    grants: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()

    def work() -> None:
        own = redis.Redis.from_url(stack.redis_url)
        limiter = RateLimiter(own, window_s=window_s)
        while not stop.is_set():
            grant = limiter.acquire([limit])
            if grant.granted:
                with lock:
                    grants.append(grant.at_ms)
            else:
                stop.wait(min(grant.wait_s, 0.05))
        own.close()

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for t in threads:
        t.start()
    stop.wait(seconds)
    stop.set()
    for t in threads:
        t.join(10)
    return sorted(grants)


def test_workers_contending_for_a_60_rpm_limit_get_exactly_60_in_a_minute(stack: Stack) -> None:
    limit = Limit(f"test-{uuid.uuid4().hex}", "rpm", 60, 1)
    grants = _contend(stack, workers=8, seconds=2.0, limit=limit, window_s=60.0)
    assert len(grants) == 60


def test_no_sliding_window_ever_holds_more_than_the_limit(stack: Stack) -> None:
    # A one-second window keeps the test short; the script is the same for any window.
    limit = Limit(f"test-{uuid.uuid4().hex}", "rpm", 5, 1)
    grants = _contend(stack, workers=8, seconds=3.5, limit=limit, window_s=1.0)
    assert len(grants) >= 15  # the limit was used, not just respected
    for i, start in enumerate(grants):
        in_window = [g for g in grants[i:] if g < start + 1000]
        assert len(in_window) <= 5, (start, in_window)


def test_token_limits_count_weights_and_later_output(client: redis.Redis) -> None:
    scope = f"test-{uuid.uuid4().hex}"
    limiter = RateLimiter(client)
    assert limiter.acquire([Limit(scope, "tpm", 1000, 600)]).granted
    limiter.record(scope, "tpm", 300)  # the output tokens of that call
    refused = limiter.acquire([Limit(scope, "tpm", 1000, 200)])
    assert not refused.granted and 0 < refused.wait_s <= 60
    assert limiter.acquire([Limit(scope, "tpm", 1000, 100)]).granted


def test_requests_and_tokens_are_taken_together_or_not_at_all(client: redis.Redis) -> None:
    scope = f"test-{uuid.uuid4().hex}"
    limiter = RateLimiter(client)
    assert limiter.acquire([Limit(scope, "rpm", 10, 1), Limit(scope, "tpm", 100, 90)]).granted
    # the token limit refuses, so the request is not counted either
    assert not limiter.acquire([Limit(scope, "rpm", 10, 1), Limit(scope, "tpm", 100, 50)]).granted
    for _ in range(9):
        assert limiter.acquire([Limit(scope, "rpm", 10, 1)]).granted
    assert not limiter.acquire([Limit(scope, "rpm", 10, 1)]).granted


@pytest.mark.parametrize("pipelined", [False, True], ids=["direct", "pipelined-reset"])
def test_a_provider_that_keeps_failing_cools_down_for_every_worker(
    client: redis.Redis, pipelined: bool
) -> None:
    name = f"p-{uuid.uuid4().hex[:8]}"
    writer = PipelinedWriter(client.connection_pool, reply_timeout_s=10) if pipelined else None
    health = Health(client, after_failures=3, window_s=60, cooldown_s=30, writer=writer)
    assert not health.record_failure(name, "503")
    assert client.exists(failures_key(name))
    health.record_success(name)  # a success in between resets the count
    wait_until(lambda: not client.exists(failures_key(name)), what="the count reset")
    if writer is not None:
        writer.close()
    assert not health.record_failure(name, "503")
    assert not health.record_failure(name, "503")
    assert health.record_failure(name, "503 Service Unavailable")
    other_worker = Health(
        redis.Redis(connection_pool=client.connection_pool),
        after_failures=3,
        window_s=60,
        cooldown_s=30,
    )
    cooling = other_worker.cooling([name, "someone-else"])
    assert set(cooling) == {name}
    assert 0 < cooling[name].seconds_left <= 30
    assert "503 Service Unavailable" in cooling[name].reason
