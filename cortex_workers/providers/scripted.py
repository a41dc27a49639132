"""The scripted model: deterministic replies for development, tests, demos and benchmarks.

A session's `metadata.script` is a list of replies consumed in order, one per model step of the
session (`ModelRequest.call_index`); once exhausted it echoes the last user message. A reply:
`{"text", "tool_calls": [{"name", "arguments"}], "first_token_ms", "token_ms",
"error": {"status", "message", "times"}, "echo_context"}`, every key optional; `error` fails
that many attempts of the step (default 1) before the reply succeeds; `echo_context` follows the
text with the system messages the model was sent. Text streams one whitespace-separated token
at a time; concatenated tokens equal the text exactly.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import RetryableError, TerminalError
from ..messages import (
    PREVIOUS_SUMMARY,
    FinishEvent,
    JsonObject,
    Message,
    ModelRequest,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallEvent,
    UsageEvent,
)

RETRYABLE_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
_TOKEN_BOUNDARY = re.compile(r"(?<=\s)(?=\S)")


class ScriptError(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: int = Field(ge=100, le=599)
    message: str = "scripted error"
    times: int = Field(default=1, ge=1, le=1000)


class ScriptToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200)
    arguments: JsonObject = Field(default_factory=dict)


MAX_FIRST_TOKEN_MS = 30_000
MAX_TOKEN_MS = 2_000
"""Caps on a reply's delays: a script cannot hold an `llm` slot for long (and a call that
sleeps past the provider's `timeout` fails as a real one would, `provider_timeout`)."""


class ScriptReply(BaseModel):
    """One reply of a script; validated when the session is created."""

    model_config = ConfigDict(extra="forbid")
    text: str = ""
    tool_calls: list[ScriptToolCall] = Field(default_factory=list)
    first_token_ms: int = Field(default=0, ge=0, le=MAX_FIRST_TOKEN_MS)
    token_ms: int = Field(default=0, ge=0, le=MAX_TOKEN_MS)
    error: ScriptError | None = None
    echo_context: bool = False
    """The text is followed by the system messages the model was sent (for tests)."""
    echo_request: bool = False
    """The text is followed by a JSON object of what the call asked: `temperature`,
    `max_tokens`, `result_schema`, the offered tools' names, the messages' roles, their
    images (each URL's first 64 characters) and the last message's content (for tests)."""


def split_tokens(text: str) -> list[str]:
    """Whitespace-separated tokens, each keeping its trailing whitespace."""
    return [t for t in _TOKEN_BOUNDARY.split(text) if t]


def _words(messages: tuple[Message, ...]) -> int:
    return sum(len(m.content.split()) + 4 for m in messages)


def summarize_messages(request: ModelRequest) -> str:
    """Deterministic summary: the previous summary, then one line per folded message."""
    lines = []
    for m in request.messages:
        if m.role == "system":
            if m.content.startswith(PREVIOUS_SUMMARY):
                lines.append(m.content.removeprefix(PREVIOUS_SUMMARY))
        else:
            snippet = " ".join(m.content.split())[:200]
            lines.append(f"- {m.role}: {snippet}")
    return "\n".join(lines)


def _asked(request: ModelRequest) -> str:
    asked = {
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "result_schema": request.result_schema,
        "tools": [t.name for t in request.tools],
        "roles": [m.role for m in request.messages],
        "images": [url[:64] for m in request.messages for url in m.images],
        "last": request.messages[-1].content if request.messages else "",
    }
    return json.dumps(asked, sort_keys=True)


def _with_context(reply: ScriptReply, request: ModelRequest) -> str:
    if reply.echo_request:
        return f"{reply.text} {_asked(request)}" if reply.text else _asked(request)
    if not reply.echo_context:
        return reply.text
    system = [m.content for m in request.messages if m.role == "system"]
    return "\n\n".join([reply.text, *system]) if reply.text else "\n\n".join(system)


class ScriptedProvider:
    """Streams a session's script like a real model streams an answer."""

    name = "scripted"

    def __init__(self, *, sleep: Any = time.sleep, timeout_s: float = 60.0) -> None:
        self._sleep = sleep
        self._timeout_s = timeout_s

    def warm(self) -> None:
        """Nothing to build."""

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        if request.purpose == "summarize":
            text = summarize_messages(request)
            yield TextDelta(text)
            yield UsageEvent(_words(request.messages), len(split_tokens(text)))
            yield FinishEvent("stop")
            return
        reply = self._reply_for(request)
        if reply.error is not None and request.attempt <= reply.error.times:
            self._raise(reply.error)
        slept = 0.0

        def wait(seconds: float) -> None:
            nonlocal slept
            if slept + seconds > self._timeout_s:  # the call's deadline, as a real one has
                raise RetryableError(
                    f"scripted timed out after {self._timeout_s:g} s", code="provider_timeout"
                )
            slept += seconds
            self._sleep(seconds)

        if reply.first_token_ms:
            wait(reply.first_token_ms / 1000)
        tokens = split_tokens(_with_context(reply, request))
        cut = request.max_tokens is not None and len(tokens) > request.max_tokens
        if cut:  # a token a word, as a model stops at its output limit
            tokens = tokens[: request.max_tokens]
        for i, token in enumerate(tokens):
            if i and reply.token_ms:
                wait(reply.token_ms / 1000)
            yield TextDelta(token)
        calls = () if cut else reply.tool_calls
        for i, call in enumerate(calls):
            yield ToolCallEvent(
                ToolCall(f"call_{request.call_index}_{i}", call.name, dict(call.arguments))
            )
        yield UsageEvent(_words(request.messages), len(tokens) + 8 * len(calls))
        yield FinishEvent("length" if cut else "tool_calls" if calls else "stop")

    @staticmethod
    def _reply_for(request: ModelRequest) -> ScriptReply:
        script = request.script or ()
        if request.call_index < len(script):
            return ScriptReply.model_validate(script[request.call_index])
        last_user = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        return ScriptReply(text=last_user)

    @staticmethod
    def _raise(error: ScriptError) -> None:
        message = f"scripted provider returned {error.status}: {error.message}"
        if error.status in RETRYABLE_STATUSES:
            raise RetryableError(message, code=f"provider_{error.status}")
        raise TerminalError(message, code="provider_error")
