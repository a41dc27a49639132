"""The provider interface: one streaming generator; the whole answer is collected from it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Protocol

from ..messages import Completion, CompletionBuilder, JsonObject, ModelRequest, StreamEvent


class Provider(Protocol):
    """A model backend. `stream` yields text deltas, tool calls, usage and one finish event.

    It raises `errors.RetryableError` for transient failures (rate limits, 5xx, timeouts,
    connection errors) and `errors.TerminalError` for failures no retry will fix.
    """

    name: str

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]: ...

    def warm(self) -> None:
        """Import the SDK and build the client now, at worker start, rather than inside a
        step's first call (where it stalls every step of the process for a second or more)."""
        ...


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per million tokens."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


def collect(events: Iterator[StreamEvent]) -> Completion:
    """The non-streaming call: the same stream, gathered into one answer by the same fold a
    streamed model step uses."""
    out = CompletionBuilder()
    for event in events:
        out.add(event)
    return out.completion


def parse_arguments(raw: str) -> JsonObject:
    """A tool call's accumulated JSON: `{}` when empty, `{"_raw": raw}` when not a JSON object
    (the tool router then reports a validation error the model can read)."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_raw": raw}


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait, from `retry-after-ms`, or `Retry-After` (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(float(ms) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)
