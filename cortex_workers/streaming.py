"""Redis Streams of turn events: key names, publishing (workers), reading (API).

Every entry has an explicit id so that writes are idempotent and fenced:
- a model step's events: `{step_no*1000 + attempt}-{chunk}`; a retried XADD of the same id is
  rejected, and once a newer attempt has written, every write of an older one is rejected;
- a tool batch's results: `{model_step_no*1000 + 999}-*` (after the model step, before the next);
- the terminal events: `step_restart` of a model step cut off mid-stream `{TERMINAL_MS}-0`,
  `error` `{TERMINAL_MS}-1` and `done` `{TERMINAL_MS}-2`, so each is written once and nothing
  can be appended after them;
- the stream's start marker `0-1` (never sent to clients), written with the turn's first
  step: a stream without it lost its beginning (Redis restarted without its data while the
  turn ran) and is rebuilt from Postgres by the reader.
Each entry holds two fields: `event` (the SSE event name) and `data` (JSON), both from
`messages.encode` of a typed event (the snapshot from Postgres encodes the same way).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.exceptions import ResponseError
from redis.typing import EncodableT, FieldT, XReadResponse

from .keys import cancel_key, notices_key, stream_key
from .messages import (
    BatchEvent,
    SessionNotice,
    StepRestart,
    StreamOpened,
    TurnDone,
    TurnError,
    TurnEvent,
    encode,
)
from .redis_clients import REPLICA_WAIT_MS
from .stream_writer import Outcome, PipelinedWriter

__all__ = ["cancel_key", "notices_key", "stream_key"]

TERMINAL_MS = 9_999_999_999_999
OPEN_ID = "0-1"
FIRST_STEP_NO = 1
TOOL_BATCH_SLOT = 999


def tool_batch_ms(model_step_no: int) -> int:
    return model_step_no * 1000 + TOOL_BATCH_SLOT


def _is_stale_id(exc: ResponseError) -> bool:
    return "equal or smaller" in str(exc)


def _fields(event: TurnEvent) -> dict[FieldT, EncodableT]:
    """An entry's two fields: the SSE event name and the JSON data."""
    name, data = encode(event)
    return {"event": name, "data": data}


def _field_args(event: TurnEvent) -> list[str]:
    """The fields as XADD's flat `field value …` arguments."""
    name, data = encode(event)
    return ["event", name, "data", data]


@dataclass
class StepStream:
    """The writer of one attempt of one step. `emit` returns False once the attempt is fenced.

    With a `writer`, entries after the first are pipelined: `emit` returns before Redis has
    replied, a refusal (fencing) or a failure shows at a later `emit`, and `flush` waits for
    every reply. Without one, each `emit` waits for its reply.
    """

    client: redis.Redis
    turn_id: uuid.UUID
    step_no: int
    attempt: int
    ttl_s: int
    writer: PipelinedWriter | None = None
    replicas: int = 0
    """With Redis Sentinel: replicas that must hold the step's entries before `flush` returns
    (WAIT, bounded), so that a failover after the step's commit loses none of them."""
    chunk: int = field(default=0)
    fenced: bool = field(default=False)
    outcome: Outcome = field(default_factory=Outcome)

    @property
    def ms(self) -> int:
        return self.step_no * 1000 + self.attempt

    def emit(self, event: TurnEvent) -> bool:
        self._settle()
        if self.fenced:
            return False
        key = stream_key(self.turn_id)
        try:
            if self.chunk == 0:
                first = self.step_no == FIRST_STEP_NO
                # the marker and the first entry as one transaction: a reader blocked on the
                # stream wakes once, with both
                pipe = self.client.pipeline(transaction=first)
                if first:
                    # refused (stale id) once anything is in the stream: a marker only ever
                    # starts a stream that holds everything from the turn's beginning
                    pipe.xadd(key, _fields(StreamOpened()), id=OPEN_ID)
                pipe.xadd(key, _fields(event), id=f"{self.ms}-0")
                pipe.expire(key, self.ttl_s)
                results = pipe.execute(raise_on_error=False)
                for result in results[-2:]:
                    if isinstance(result, Exception):
                        raise result
            elif self.writer is not None:
                self.writer.send(
                    self.outcome, "XADD", key, f"{self.ms}-{self.chunk}", *_field_args(event)
                )
            else:
                self.client.xadd(key, _fields(event), id=f"{self.ms}-{self.chunk}")
        except ResponseError as exc:
            if not _is_stale_id(exc):
                raise
            self.fenced = True
            return False
        self.chunk += 1
        return True

    def flush(self) -> bool:
        """Wait for the replies to every entry emitted; False if this attempt was fenced."""
        if self.writer is not None:
            if self.replicas:
                # on the writer's own connection: WAIT counts that connection's writes
                self.writer.send(self.outcome, "WAIT", self.replicas, REPLICA_WAIT_MS)
            self.writer.wait(self.outcome)
            self._settle()
        elif self.replicas:
            self.client.wait(self.replicas, REPLICA_WAIT_MS)
        return not self.fenced

    def _settle(self) -> None:
        """Take in what the replies so far said: raise a failure, note a fencing."""
        outcome = self.outcome
        if outcome.failed is not None:
            raise outcome.failed
        if outcome.refused is not None:
            if not _is_stale_id(outcome.refused):
                raise outcome.refused
            self.fenced = True


def emit_batch_event(
    client: redis.Redis,
    turn_id: uuid.UUID,
    *,
    model_step_no: int,
    event: BatchEvent,
) -> bool:
    """Append an event of a tool batch (`tool_result`, `tool_progress`, `proposal`) after its
    model step's events; False if the turn has moved on."""
    try:
        # `{ms}-*`: Redis picks the sequence number under the batch's millisecond part
        client.xadd(stream_key(turn_id), _fields(event), id=f"{tool_batch_ms(model_step_no)}-*")
    except ResponseError as exc:
        if not _is_stale_id(exc):
            raise
        return False
    return True


def emit_session_notice(
    client: redis.Redis, session_id: uuid.UUID, *, event: SessionNotice, ttl_s: int
) -> None:
    """An event about the session outside any turn (a proposal confirmed, rejected, expired,
    executed); the session's SSE stream carries these too."""
    key = notices_key(session_id)
    pipe = client.pipeline(transaction=False)
    pipe.xadd(key, _fields(event), maxlen=1000, approximate=True)
    pipe.expire(key, ttl_s)
    pipe.execute()


def tool_results_emitted(
    client: redis.Redis, turn_id: uuid.UUID, *, model_step_no: int
) -> set[str]:
    """Call ids whose `tool_result` is already in the stream for this tool batch."""
    ms = tool_batch_ms(model_step_no)
    entries = client.xrange(stream_key(turn_id), min=f"{ms}-0", max=f"{ms}-18446744073709551615")
    return {
        str(json.loads(fields[b"data"])["id"])
        for _, fields in entries or ()
        if fields and fields.get(b"event") == b"tool_result"
    }


def emit_terminal(
    client: redis.Redis,
    turn_id: uuid.UUID,
    *,
    done: TurnDone,
    error: TurnError | None = None,
    discard: StepRestart | None = None,
    ttl_s: int,
) -> None:
    """Write the turn's terminal events once; repeating this is harmless.

    `discard` names a model step cut off mid-stream: its partial text is to be dropped, so the
    streamed text still equals the stored messages.
    """
    key = stream_key(turn_id)
    pipe = client.pipeline(transaction=False)  # one round trip for all of them
    for seq, event in terminal_entries(done=done, error=error, discard=discard):
        pipe.xadd(key, _fields(event), id=f"{TERMINAL_MS}-{seq}")
    pipe.expire(key, ttl_s)
    for result in pipe.execute(raise_on_error=False):
        if isinstance(result, ResponseError) and _is_stale_id(result):
            continue  # written already: this is a repeat
        if isinstance(result, Exception):
            raise result


def terminal_entries(
    *, done: TurnDone, error: TurnError | None, discard: StepRestart | None
) -> list[tuple[int, TurnEvent]]:
    """(seq, event) of a turn's terminal events, in order, under `TERMINAL_MS`."""
    entries: list[tuple[int, TurnEvent | None]] = [(0, discard), (1, error), (2, done)]
    return [(seq, event) for seq, event in entries if event is not None]


@dataclass(frozen=True, slots=True)
class Entry:
    """One stream entry as the SSE layer sends it."""

    id: str
    event: str
    data: str

    @property
    def is_done(self) -> bool:
        return self.event == "done"


def decode_entry(entry_id: bytes | str, fields: dict[Any, Any]) -> Entry:
    def text(value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    norm = {text(k): text(v) for k, v in fields.items()}
    return Entry(id=text(entry_id), event=norm.get("event", "message"), data=norm.get("data", "{}"))


def read_entries(reply: XReadResponse) -> list[Entry]:
    """The entries of an XREAD reply on one stream (`[[key, [(id, fields), …]]]`); none when
    it timed out."""
    if not reply:
        return []
    assert isinstance(reply, list), "stream clients speak RESP2"
    return [decode_entry(entry_id, fields) for entry_id, fields in reply[0][1]]


FIRST_ENTRY = (FIRST_STEP_NO * 1000 + 1, 0)
"""The entry written right after the start marker: the first chunk of the first step's first
attempt, written in the same transaction as the marker."""


def follows(previous: tuple[int, int], at: tuple[int, int]) -> bool:
    """Whether `at` directly follows `previous` in every stream that lost nothing between them:
    the next chunk of the same step attempt, or the first entry right after the start marker."""
    if at == (previous[0], previous[1] + 1):
        return True
    return previous == (0, 1) and at == FIRST_ENTRY


def parse_entry_id(value: str) -> tuple[int, int] | None:
    """`"1001-3"` → (1001, 3); None when it is not a stream id."""
    ms, sep, seq = value.partition("-")
    if not sep or not ms.isdigit() or not seq.isdigit():
        return None
    return int(ms), int(seq)
