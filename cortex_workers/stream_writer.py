"""Stream writes of every step of a process, pipelined over one Redis connection.

Written one by one, each token costs its step a round trip: the step waits for Redis's reply
before it asks the model for the next token. Here a write is sent at once and the step goes
on; one reader thread takes the replies off the connection, in order, and hands each to the
write it answers: a refused id fences that step attempt, a broken connection fails every
write still in flight. A step waits for its replies only where it must, before it commits
(`wait`). When a model is slower than a round trip, every reply has come back before the
next token, and nothing is different from writing one by one.
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


class PipelinedWriter:
    """Send commands whose replies only matter later; one per process, shared by its threads."""

    def __init__(self, pool: redis.ConnectionPool, *, reply_timeout_s: float = 30.0) -> None:
        kwargs: dict[str, Any] = dict(pool.connection_kwargs)
        kwargs["health_check_interval"] = 0  # a health check would read a reply on the send side
        kwargs["client_name"] = f"{CLIENT_NAME}-{os.getpid()}"  # to find it in CLIENT LIST
        self._conn = pool.connection_class(**kwargs)
        self._reply_timeout_s = reply_timeout_s
        self._send_lock = threading.Lock()
        self._cond = threading.Condition()
        self._waiting: deque[Outcome] = deque()
        self._reader: threading.Thread | None = None
        self._closed = False

    def send(self, outcome: Outcome, *args: Any) -> None:
        """Send one command; its reply lands in `outcome`. Raises if it could not be sent."""
        packed = self._conn.pack_command(*args)
        with self._send_lock:
            if self._closed:
                raise redis.ConnectionError("the stream writer is closed")
            self._start_reader()
            self._conn.send_packed_command(packed, check_health=False)
            with self._cond:
                outcome.in_flight += 1
                self._waiting.append(outcome)
                self._cond.notify_all()

    def wait(self, outcome: Outcome) -> None:
        """Until every command sent for `outcome` has its reply."""
        with self._cond:
            if not self._cond.wait_for(lambda: outcome.in_flight == 0, self._reply_timeout_s):
                raise redis.TimeoutError(
                    f"no reply from Redis to {outcome.in_flight} stream writes"
                    f" in {self._reply_timeout_s:.0f} s"
                )

    def close(self) -> None:
        with self._send_lock, self._cond:
            self._closed = True
            self._fail_all(redis.ConnectionError("the stream writer is closed"))
            self._cond.notify_all()
        self._conn.disconnect()

    def _start_reader(self) -> None:
        if self._reader is None or not self._reader.is_alive():
            self._reader = threading.Thread(
                target=self._read_replies, name="cortex-stream-replies", daemon=True
            )
            self._reader.start()

    def _read_replies(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._waiting) or self._closed)
                if self._closed:
                    return
            try:
                self._conn.read_response()
                error: ResponseError | None = None
            except ResponseError as exc:  # this command was refused; the connection is fine
                error = exc
            except Exception as exc:  # the connection broke: nothing in flight will be answered
                log.warning("stream writes in flight failed: %s", exc)
                with self._send_lock, self._cond:
                    self._fail_all(exc)
                    self._conn.disconnect()  # the next send reconnects
                continue
            with self._cond:
                if not self._waiting:  # failed meanwhile by `close`
                    continue
                outcome = self._waiting.popleft()
                outcome.in_flight -= 1
                if error is not None and outcome.refused is None:
                    outcome.refused = error
                self._cond.notify_all()

    def _fail_all(self, exc: Exception) -> None:
        while self._waiting:
            outcome = self._waiting.popleft()
            outcome.in_flight -= 1
            outcome.failed = outcome.failed or exc
        self._cond.notify_all()
