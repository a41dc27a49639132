"""The provider interface: one streaming generator; the whole answer is collected from it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from ..messages import (
    Completion,
    FinishEvent,
    ModelRequest,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    UsageEvent,
)


class Provider(Protocol):
    """A model backend. `stream` yields text deltas, tool calls, usage and one finish event.

    It raises `errors.RetryableError` for transient failures (rate limits, 5xx, timeouts,
    connection errors) and `errors.TerminalError` for failures no retry will fix.
    """

    name: str

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]: ...


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per million tokens."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


def collect(events: Iterator[StreamEvent]) -> Completion:
    """The non-streaming call: the same stream, gathered into one answer."""
    out = Completion()
    for event in events:
        match event:
            case TextDelta(text=text):
                out.text += text
            case ToolCallEvent(call=call):
                out.tool_calls.append(call)
            case UsageEvent(input_tokens=i, output_tokens=o):
                out.input_tokens, out.output_tokens = i, o
            case FinishEvent(reason=reason):
                out.finish_reason = reason
    return out
