"""Stream writes of every step of a process, pipelined and coalesced over one Redis connection.

Written one by one, each token costs its step a round trip: the step waits for Redis's reply
before it asks the model for the next token. Here a write is queued and the step goes on. A
sender thread sends everything queued in one socket write, and one reader thread takes the
replies off the connection, in order, and hands each to the write it answers: a refused id
fences that step attempt, a broken connection fails every write queued or in flight. A step
waits for its replies only where it must, before it commits (`wait`).

Writes queued while the sender is busy, or while their step keeps running (with gevent, a
greenlet runs until it waits for I/O), go out together: a model that yields a burst of tokens
costs one system call, not one per token. A token that arrives on its own is sent as soon as
its step next waits for the model, which is at once.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.exceptions import ResponseError

log = logging.getLogger(__name__)

CLIENT_NAME = "cortex-stream-writes"


@dataclass
class Outcome:
    """What the replies to one writer's writes said so far."""

    in_flight: int = 0
    refused: ResponseError | None = field(default=None)
    failed: Exception | None = field(default=None)
    settled: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.settled.set()


class PipelinedWriter:
    """Send commands whose replies only matter later; one per process, shared by its threads.

    `writes` counts the socket writes so far (each carries every command queued before it)."""

    def __init__(self, pool: redis.ConnectionPool, *, reply_timeout_s: float = 30.0) -> None:
        kwargs: dict[str, Any] = dict(pool.connection_kwargs)
        kwargs["health_check_interval"] = 0  # a health check would read a reply on the send side
        # a stalled Redis (paused, busy) is waited for as long as a step waits for its replies,
        # not the pool's shorter socket timeout: the writes go through once it is back
        kwargs["socket_timeout"] = reply_timeout_s
        kwargs["client_name"] = f"{CLIENT_NAME}-{os.getpid()}"  # to find it in CLIENT LIST
        self._conn = pool.connection_class(**kwargs)
        self._reply_timeout_s = reply_timeout_s
        self._lock = threading.Lock()
        self._to_send = threading.Condition(self._lock)  # the sender waits here
        self._to_read = threading.Condition(self._lock)  # the reader waits here
        self._queued: list[bytes] = []
        self._queued_for: list[Outcome] = []
        self._waiting: deque[Outcome] = deque()  # sent, reply due, in the order sent
        self._generation = 0  # of the connection; a failure starts the next one
        self._broken = False  # reconnect before the next write
        self._reading = False
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.writes = 0

    def send(self, outcome: Outcome, *args: Any) -> None:
        """Queue one command; its reply lands in `outcome`. Raises once the writer is closed."""
        packed = self._conn.pack_command(*args)
        with self._lock:
            if self._closed:
                raise redis.ConnectionError("the stream writer is closed")
            if not self._threads:
                self._start_threads()
            if not self._queued:
                self._to_send.notify()
            self._queued.extend(packed)
            self._queued_for.append(outcome)
            outcome.in_flight += 1
            outcome.settled.clear()

    def wait(self, outcome: Outcome) -> None:
        """Until every command sent for `outcome` has its reply (or failed)."""
        if not outcome.settled.wait(self._reply_timeout_s):
            raise redis.TimeoutError(
                f"no reply from Redis to {outcome.in_flight} stream writes"
                f" in {self._reply_timeout_s:.0f} s"
            )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._generation += 1
            self._fail_all(redis.ConnectionError("the stream writer is closed"))
            self._to_send.notify_all()
            self._to_read.notify_all()
        self._conn.disconnect()

    def _start_threads(self) -> None:
        self._threads = [
            threading.Thread(target=loop, name=name, daemon=True)
            for loop, name in (
                (self._send_queued, "cortex-stream-sends"),
                (self._read_replies, "cortex-stream-replies"),
            )
        ]
        for t in self._threads:
            t.start()

    def _send_queued(self) -> None:
        while True:
            with self._lock:
                self._to_send.wait_for(lambda: bool(self._queued) or self._closed)
                if self._closed:
                    return
                if self._broken:
                    # the reader is off the broken connection before it is replaced
                    self._to_send.wait_for(lambda: not self._reading or self._closed)
                    if self._closed:
                        return
                    self._conn.disconnect()
                    self._broken = False
                data, batch = b"".join(self._queued), self._queued_for
                self._queued, self._queued_for = [], []
                generation = self._generation
            try:
                # connect() first: a sentinel-managed connection asks the sentinels for the
                # primary only there (sending alone would connect to its default address)
                self._conn.connect()
                self._conn.send_packed_command([data], check_health=False)
                failure: Exception | None = None
            except Exception as exc:
                failure = exc
            with self._lock:
                self.writes += 1
                if failure is None and generation == self._generation:
                    if not self._waiting:
                        self._to_read.notify()
                    self._waiting.extend(batch)
                    continue
                failure = failure or redis.ConnectionError("the stream connection broke")
                if generation == self._generation:
                    log.warning("stream writes failed: %s", failure)
                    self._break(failure)
                self._fail(batch, failure)

    def _read_replies(self) -> None:
        while True:
            with self._lock:
                self._to_read.wait_for(lambda: bool(self._waiting) or self._closed)
                if self._closed:
                    return
                generation = self._generation
                self._reading = True
            error: ResponseError | None = None
            failure: Exception | None = None
            try:
                self._conn.read_response(disconnect_on_error=False)
            except ResponseError as exc:  # this command was refused; the connection is fine
                error = exc
            except Exception as exc:  # the connection broke: nothing in flight will be answered
                failure = exc
            with self._lock:
                self._reading = False
                if self._broken:
                    self._to_send.notify()  # it may be waiting to reconnect
                if generation != self._generation:  # failed meanwhile by the sender or `close`
                    continue
                if failure is not None:
                    log.warning("stream writes in flight failed: %s", failure)
                    self._break(failure)
                    continue
                outcome = self._waiting.popleft()
                if error is not None and outcome.refused is None:
                    outcome.refused = error
                self._settle(outcome)

    def _break(self, exc: Exception) -> None:
        """The connection failed: fail everything queued or in flight, reconnect before the
        next write. Under the lock."""
        self._generation += 1
        self._broken = True
        self._fail_all(exc)

    def _fail_all(self, exc: Exception) -> None:
        batch = [*self._waiting, *self._queued_for]
        self._waiting.clear()
        self._queued, self._queued_for = [], []
        self._fail(batch, exc)

    def _fail(self, batch: list[Outcome], exc: Exception) -> None:
        for outcome in batch:
            outcome.failed = outcome.failed or exc
            self._settle(outcome)

    @staticmethod
    def _settle(outcome: Outcome) -> None:
        outcome.in_flight -= 1
        if outcome.in_flight == 0:
            outcome.settled.set()
