"""The stream id scheme on a real Redis: fencing of attempts, the start marker, contiguity."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from support import Stack, wait_until

from cortex_workers.messages import StepRestart, Token
from cortex_workers.stream_writer import CLIENT_NAME, PipelinedWriter
from cortex_workers.streaming import (
    OPEN_ID,
    Entry,
    StepStream,
    decode_entry,
    follows,
    parse_entry_id,
    stream_key,
)

pytestmark = pytest.mark.servers


@pytest.fixture
def r(stack: Stack) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(stack.redis_url)
    yield client
    client.close()


def _entries(r: redis.Redis, turn_id: uuid.UUID) -> list[Entry]:
    return [decode_entry(i or b"", f or {}) for i, f in r.xrange(stream_key(turn_id)) or ()]


def _ids(r: redis.Redis, turn_id: uuid.UUID) -> list[str]:
    return [e.id for e in _entries(r, turn_id)]


def test_a_newer_attempt_fences_the_older_one(r: redis.Redis) -> None:
    turn = uuid.uuid4()
    first = StepStream(r, turn, 1, 1, ttl_s=60)
    assert first.emit(Token(text="a", step=1)) and first.emit(Token(text="b", step=1))
    second = StepStream(r, turn, 1, 2, ttl_s=60)
    assert second.emit(StepRestart(step=1, attempt=2))
    assert not first.emit(Token(text="late", step=1)) and first.fenced
    assert not StepStream(r, turn, 1, 1, ttl_s=60).emit(Token(text="again", step=1))
    assert _ids(r, turn) == [OPEN_ID, "1001-0", "1001-1", "1002-0"]
    assert 0 < r.ttl(stream_key(turn)) <= 60


def test_a_blocked_reader_wakes_once_with_the_marker_and_the_first_entry(
    r: redis.Redis,
) -> None:
    turn = uuid.uuid4()
    got: list[Any] = []
    reader = threading.Thread(
        target=lambda: got.extend(r.xread({stream_key(turn): "0-0"}, block=10_000) or [])
    )
    reader.start()
    wait_until(lambda: any(c.get("cmd") == "xread" for c in r.client_list()), what="reader blocked")
    assert StepStream(r, turn, 1, 1, ttl_s=60).emit(Token(text="hello", step=1))
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


@pytest.fixture
def writer(r: redis.Redis) -> Iterator[PipelinedWriter]:
    w = PipelinedWriter(r.connection_pool, reply_timeout_s=10)
    yield w
    w.close()


def test_pipelined_entries_land_in_order_and_flush_waits_for_them(
    r: redis.Redis, writer: PipelinedWriter
) -> None:
    turn = uuid.uuid4()
    stream = StepStream(r, turn, 1, 1, ttl_s=60, writer=writer)
    for i in range(200):
        assert stream.emit(Token(text=str(i), step=1))
    assert stream.flush() and stream.outcome.in_flight == 0
    entries = _entries(r, turn)
    assert [e.id for e in entries][:3] == [OPEN_ID, "1001-0", "1001-1"]
    texts = [json.loads(e.data)["text"] for e in entries[1:]]
    assert texts == [str(i) for i in range(200)]


def test_a_pipelined_attempt_sees_it_was_fenced_at_its_next_emit_or_its_flush(
    r: redis.Redis, writer: PipelinedWriter
) -> None:
    turn = uuid.uuid4()
    old = StepStream(r, turn, 1, 1, ttl_s=60, writer=writer)
    assert old.emit(Token(text="a", step=1))
    assert StepStream(r, turn, 1, 2, ttl_s=60).emit(StepRestart(step=1, attempt=2))
    assert old.emit(Token(text="sent before the refusal is known", step=1))
    assert not old.flush() and old.fenced
    assert not old.emit(Token(text="never sent", step=1))
    assert _ids(r, turn) == [OPEN_ID, "1001-0", "1002-0"]


def test_a_broken_connection_fails_the_writes_in_flight_and_the_next_ones_reconnect(
    r: redis.Redis, writer: PipelinedWriter
) -> None:
    turn = uuid.uuid4()
    stream = StepStream(r, turn, 1, 1, ttl_s=60, writer=writer)
    assert stream.emit(Token(text="a", step=1)) and stream.emit(Token(text="b", step=1))
    assert stream.flush()
    name = f"{CLIENT_NAME}-{os.getpid()}"
    (mine,) = [c for c in r.client_list() if c.get("name") == name]
    r.client_pause(2000, all=False)  # writes wait: the next entries stay in flight
    try:
        assert stream.emit(Token(text="in flight", step=1))
        r.client_kill_filter(_id=mine["id"])
    finally:
        r.client_unpause()
    with pytest.raises(redis.ConnectionError):
        stream.flush()
    with pytest.raises(redis.ConnectionError):
        stream.emit(Token(text="after the failure", step=1))  # this attempt stops here
    fresh = StepStream(r, uuid.uuid4(), 1, 1, ttl_s=60, writer=writer)
    assert fresh.emit(Token(text="x", step=1)) and fresh.emit(Token(text="y", step=1))
    assert fresh.flush()
    assert _ids(r, turn) == [OPEN_ID, "1001-0", "1001-1"]


COALESCE = """
import sys, uuid
from gevent import monkey

monkey.patch_all()
import redis
from cortex_workers.messages import Token
from cortex_workers.stream_writer import PipelinedWriter
from cortex_workers.streaming import StepStream, stream_key

r = redis.Redis.from_url(sys.argv[1])
writer = PipelinedWriter(r.connection_pool, reply_timeout_s=10)
warm = StepStream(r, uuid.uuid4(), 1, 1, ttl_s=60, writer=writer)
assert warm.emit(Token(text="a", step=1)) and warm.emit(Token(text="b", step=1)) and warm.flush()
before = writer.writes
turn = uuid.uuid4()
stream = StepStream(r, turn, 1, 1, ttl_s=60, writer=writer)
for i in range(50):  # a burst, as from a model that yields faster than a round trip
    assert stream.emit(Token(text=str(i), step=1))
assert stream.flush()
print(writer.writes - before, r.xlen(stream_key(turn)))
"""


def test_a_burst_of_entries_goes_out_in_one_write_on_gevent(stack: Stack) -> None:
    """The `llm` worker's pool: a step runs until it waits, so its burst is one send."""
    out = subprocess.run(
        [sys.executable, "-c", COALESCE, stack.redis_url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    writes, entries = map(int, out.stdout.split())
    # the first entry goes with the stream's marker (one transaction), the other 49 together
    assert (writes, entries) == (1, 51)
