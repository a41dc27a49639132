"""Typed conversation messages and provider stream events: pure values, no ids from storage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
PREVIOUS_SUMMARY = "Previous summary:\n"
"""Prefix of the system message that carries the rolling summary into a summarize request."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call the model asked for; `id` is the provider's call id."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the context the model sees."""

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    """For `tool` messages: the call this is the result of."""
    name: str | None = None
    """For `tool` messages: the tool's name."""
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as offered to the model."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What a provider needs to answer one model step."""

    model: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    purpose: Literal["reply", "summarize"] = "reply"
    temperature: float | None = None
    max_tokens: int | None = None
    script: tuple[dict[str, Any], ...] | None = None
    """The session's `metadata.script` (scripted provider only)."""
    call_index: int = 0
    """Which model step of the session this is, from 0 (scripted provider)."""
    attempt: int = 1
    """Which attempt of this step this is, from 1."""


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    call: ToolCall
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class UsageEvent:
    """Token counts of the whole call; a provider may report it more than once (last wins)."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    kind: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True)
class WarningEvent:
    """Something the turn should record (e.g. tools offered through the prompt)."""

    code: str
    message: str
    kind: Literal["warning"] = "warning"


@dataclass(frozen=True, slots=True)
class FinishEvent:
    reason: Literal["stop", "tool_calls", "length", "cancelled"] = "stop"
    kind: Literal["finish"] = "finish"


StreamEvent = TextDelta | ToolCallEvent | UsageEvent | WarningEvent | FinishEvent


@dataclass(slots=True)
class Completion:
    """A whole answer, collected from a stream."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    finish_reason: str = "stop"
    warnings: list[WarningEvent] = field(default_factory=list)
