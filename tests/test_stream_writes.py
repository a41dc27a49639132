"""The stream id scheme on a real Redis: fencing of attempts, the start marker, contiguity."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from support import Stack, wait_until

from cortex_workers.streaming import (
    OPEN_ID,
    StepStream,
    follows,
    parse_entry_id,
    stream_key,
)


@pytest.fixture
def r(stack: Stack) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(stack.redis_url)
    yield client
    client.close()


def _ids(r: redis.Redis, turn_id: uuid.UUID) -> list[str]:
    return [i.decode() for i, _ in r.xrange(stream_key(turn_id))]  # type: ignore[union-attr]


def test_a_newer_attempt_fences_the_older_one(r: redis.Redis) -> None:
    turn = uuid.uuid4()
    first = StepStream(r, turn, 1, 1, ttl_s=60)
    assert first.emit("token", {"text": "a"}) and first.emit("token", {"text": "b"})
    second = StepStream(r, turn, 1, 2, ttl_s=60)
    assert second.emit("step_restart", {"step": 1, "attempt": 2})
    assert not first.emit("token", {"text": "late"}) and first.fenced
    assert not StepStream(r, turn, 1, 1, ttl_s=60).emit("token", {"text": "again"})
    assert _ids(r, turn) == [OPEN_ID, "1001-0", "1001-1", "1002-0"]
    assert 0 < r.ttl(stream_key(turn)) <= 60  # type: ignore[operator]


def test_a_blocked_reader_wakes_once_with_the_marker_and_the_first_entry(
    r: redis.Redis,
) -> None:
    turn = uuid.uuid4()
    got: list[Any] = []
    reader = threading.Thread(
        target=lambda: got.extend(r.xread({stream_key(turn): "0-0"}, block=10_000) or [])  # type: ignore[arg-type]
    )
    reader.start()
    wait_until(lambda: any(c.get("cmd") == "xread" for c in r.client_list()), what="reader blocked")
    assert StepStream(r, turn, 1, 1, ttl_s=60).emit("token", {"text": "hello"})
    reader.join(timeout=10)
    assert [i.decode() for i, _ in got[0][1]] == [OPEN_ID, "1001-0"]


@pytest.mark.parametrize(
    ("previous", "at", "expected"),
    [
        ("1001-3", "1001-4", True),
        ("0-1", "1001-0", True),  # nothing can be written between the marker and this
        ("0-1", "1002-0", False),  # the first attempt's entries could have been lost
        ("0-1", "1001-1", False),
        ("1001-3", "1001-5", False),
        ("1001-3", "1999-0", False),  # the tool batch: entries could be missing before it
        ("1999-0", "2001-0", False),
    ],
)
def test_which_entries_directly_follow_each_other(previous: str, at: str, expected: bool) -> None:
    p, a = parse_entry_id(previous), parse_entry_id(at)
    assert p is not None and a is not None
    assert follows(p, a) is expected
