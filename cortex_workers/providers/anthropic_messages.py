"""The Anthropic Messages API provider: one streaming call per model step, through the SDK.

The SDK's own retries are off (`max_retries=0`); failures become our errors, so the retry policy
of the turn decides: 408/409/429/5xx (529 `overloaded_error` included), timeouts, connection
failures and retryable mid-stream `error` events raise `RetryableError`; other 4xx and
non-retryable stream errors raise `TerminalError`. The SDK is imported on first use (it takes
a second to import), so importing this module costs nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ..errors import CortexError, RetryableError, TerminalError
from ..messages import (
    FinishEvent,
    FinishReason,
    Message,
    ModelRequest,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallEvent,
    ToolSpec,
    UsageEvent,
)
from .base import parse_arguments, retry_after_seconds
from .config import ProviderConfig

if TYPE_CHECKING:
    import anthropic
    from anthropic.types import MessageParam, RawMessageStreamEvent, ToolParam


RETRYABLE_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
RETRYABLE_STREAM_ERRORS = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
)
"""Mid-stream `error` event types worth a retry; any other type fails the turn."""
STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "refusal": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
}
CONTINUATION = "(conversation continues)"
"""The user message put first when a context would otherwise start with the assistant."""
NO_RESULT = "(no result was recorded for this tool call)"


# -- request -------------------------------------------------------------------------------


def _block_list(message: dict[str, Any]) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], message["content"])


def _blocks(m: Message, tool_ids: set[str]) -> list[dict[str, Any]]:
    """Content blocks for one message; `tool_ids`: the tool_use ids a result may answer."""
    if m.role == "assistant":
        blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
        blocks += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
            for c in m.tool_calls
        ]
        return blocks
    if m.role == "tool":
        images = [image_block(url) for url in m.images]
        if m.tool_call_id in tool_ids:
            # a result with images holds them: its content is then a list of blocks
            body: Any = [{"type": "text", "text": m.content}, *images] if images else m.content
            result = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": body}
            return [{**result, "is_error": m.is_error}]
        # Its call fell out of the context window: the API would reject a bare tool_result.
        label = "error" if m.is_error else "result"
        text = f"[tool {label} of {m.name or 'a tool'}]\n{m.content}"
        return [{"type": "text", "text": text}, *images]
    blocks = [{"type": "text", "text": m.content}] if m.content else []
    return blocks + [image_block(url) for url in m.images]


def image_block(url: str) -> dict[str, Any]:
    """An image of a user message or a tool result: a `data:` URL as base64, else by URL."""
    if url.startswith("data:"):
        header, _, data = url.partition(",")
        media_type = header.removeprefix("data:").split(";", 1)[0]
        return {"type": "image", "source": {"type": "base64", "media_type": media_type,
                                            "data": data}}  # fmt: skip
    return {"type": "image", "source": {"type": "url", "url": url}}


def build_messages(messages: tuple[Message, ...]) -> tuple[str, list[dict[str, Any]]]:
    """The system prompt (system messages joined by blank lines) and the API's `messages`.

    Tool results become `tool_result` blocks of a user message; adjacent messages of one role
    merge, so roles alternate; the list starts with a user message; every `tool_use` gets a
    `tool_result` in the next message. A user message of one text block is a plain string.
    """
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    out: list[dict[str, Any]] = []
    tool_ids: set[str] = set()  # the calls of the latest assistant message
    for m in messages:
        if m.role == "system":
            continue
        role = "assistant" if m.role == "assistant" else "user"
        merge = bool(out) and out[-1]["role"] == role
        if role == "assistant":
            tool_ids = (tool_ids if merge else set()) | {c.id for c in m.tool_calls}
        blocks = _blocks(m, tool_ids)
        if not blocks:
            continue
        if merge:
            _block_list(out[-1]).extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    if not out or out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": CONTINUATION}]})
    _answer_every_call(out)
    for message in out:
        blocks = _block_list(message)
        if message["role"] == "user":
            blocks.sort(key=lambda b: b["type"] != "tool_result")  # results lead their message
            if len(blocks) == 1 and blocks[0]["type"] == "text":
                message["content"] = blocks[0]["text"]
    return system, out


def _answer_every_call(out: list[dict[str, Any]]) -> None:
    """Give each `tool_use` without a `tool_result` in the next message an error result."""
    for i, message in enumerate(out):
        if message["role"] != "assistant":
            continue
        calls = [b["id"] for b in _block_list(message) if b["type"] == "tool_use"]
        if not calls:
            continue
        if i + 1 == len(out):
            out.append({"role": "user", "content": []})
        answered = {b.get("tool_use_id") for b in _block_list(out[i + 1])}
        _block_list(out[i + 1]).extend(
            {"type": "tool_result", "tool_use_id": c, "content": NO_RESULT, "is_error": True}
            for c in calls
            if c not in answered
        )


def build_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    """Tools as the API takes them: `name`, `description`, `input_schema` (an object schema)."""
    return [
        {
            "name": t.name,
            "description": t.description,
            "input_schema": t.parameters or {"type": "object", "properties": {}},
        }
        for t in tools
    ]


RESULT_TOOL = "result"
"""The tool a structured answer is forced through: its arguments are the answer."""


def forced_result_tool(request: ModelRequest) -> list[dict[str, Any]]:
    """With a `result_schema`, the one tool the model must call (forced tool use)."""
    if request.result_schema is None:
        return []
    description = "Give the answer: its arguments are the result."
    return [
        {"name": RESULT_TOOL, "description": description, "input_schema": request.result_schema}
    ]


# -- response ------------------------------------------------------------------------------


@dataclass
class _ToolBlock:
    id: str
    name: str
    start_input: dict[str, Any]
    partial_json: list[str] = field(default_factory=list)

    def call(self) -> ToolCall:
        raw = "".join(self.partial_json)
        arguments = parse_arguments(raw) if raw else dict(self.start_input)
        return ToolCall(self.id, self.name, arguments)


@dataclass
class _StreamState:
    """What the raw events of one message say, gathered as they arrive."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    stop_reason: str | None = None
    stopped: bool = False
    tool_blocks: dict[int, _ToolBlock] = field(default_factory=dict)
    calls: int = 0

    def feed(self, event: RawMessageStreamEvent) -> Iterator[StreamEvent]:
        """Our events for one raw event (text deltas and finished tool calls)."""
        if event.type == "message_start":
            usage = event.message.usage
            self.input_tokens = usage.input_tokens or 0
            self.output_tokens = usage.output_tokens or 0
            self.cache_read = usage.cache_read_input_tokens or 0
            self.cache_write = usage.cache_creation_input_tokens or 0
        elif event.type == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                start = block.input if isinstance(block.input, dict) else {}
                self.tool_blocks[event.index] = _ToolBlock(block.id, block.name, start)
            elif block.type == "text" and block.text:
                yield TextDelta(block.text)
        elif event.type == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta" and delta.text:
                yield TextDelta(delta.text)
            elif delta.type == "input_json_delta" and event.index in self.tool_blocks:
                self.tool_blocks[event.index].partial_json.append(delta.partial_json)
        elif event.type == "content_block_stop":
            tool = self.tool_blocks.pop(event.index, None)
            if tool is not None:
                self.calls += 1
                yield ToolCallEvent(tool.call())
        elif event.type == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            final = event.usage  # output tokens; newer APIs repeat the input counts here
            self.output_tokens = final.output_tokens or self.output_tokens
            self.input_tokens = final.input_tokens or self.input_tokens
            self.cache_read = final.cache_read_input_tokens or self.cache_read
            self.cache_write = final.cache_creation_input_tokens or self.cache_write
        elif event.type == "message_stop":
            self.stopped = True

    def finish_reason(self) -> FinishReason:
        if self.stop_reason in STOP_REASONS:
            return STOP_REASONS[self.stop_reason]
        return "tool_calls" if self.calls else "stop"


# -- errors --------------------------------------------------------------------------------


# -- provider ------------------------------------------------------------------------------


class AnthropicProvider:
    """Claude through the Messages API, streamed; see the module docstring for errors."""

    def __init__(self, config: ProviderConfig) -> None:
        self.name = config.name
        self.config = config
        self._client: anthropic.Anthropic | None = None
        self._lock = threading.Lock()

    def client(self) -> anthropic.Anthropic:
        """The SDK client, created on first use (once per instance, thread-safe)."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    import anthropic

                    self._client = anthropic.Anthropic(
                        api_key=self.config.api_key,
                        base_url=self.config.base_url,
                        max_retries=0,
                        timeout=self.config.timeout_s,
                        default_headers=self.config.extra_headers or None,
                    )
        return self._client

    def warm(self) -> None:
        """The client and its messages resource, built ahead of the first call."""
        _ = self.client().messages

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """Text deltas, tool calls (each when its block ends), then usage and finish."""
        try:
            yield from self._stream(request)
        except CortexError:
            raise
        except Exception as exc:
            error = self.classify(exc)
            if error is None:
                raise
            raise error from exc

    def _stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        import anthropic

        client = self.client()
        system, messages = build_messages(request.messages)
        tools = build_tools(request.tools) + forced_result_tool(request)
        temperature = request.temperature
        try:
            events = client.messages.create(
                model=request.model or self.config.model,
                max_tokens=request.max_tokens or self.config.max_tokens,
                messages=cast("list[MessageParam]", messages),
                system=system or anthropic.omit,
                tools=cast("list[ToolParam]", tools) if tools else anthropic.omit,
                tool_choice=(
                    {"type": "tool", "name": RESULT_TOOL}
                    if request.result_schema is not None
                    else anthropic.omit
                ),
                stream=True,
                extra_body={"temperature": temperature} if temperature is not None else None,
            )
        except TypeError as exc:  # the SDK found no credential to send
            raise self._no_credentials(exc) from exc
        state = _StreamState()
        with events:
            for event in events:
                yield from state.feed(event)
        if not state.stopped:
            raise RetryableError(
                f"{self.name} ended the stream before message_stop", code="provider_stream_error"
            )
        yield UsageEvent(
            state.input_tokens,
            state.output_tokens,
            cache_read_tokens=state.cache_read,
            cache_write_tokens=state.cache_write,
        )
        yield FinishEvent(state.finish_reason())

    def classify(self, exc: Exception) -> CortexError | None:
        """Our error for an SDK or transport exception; None for anything else (a bug)."""
        import anthropic
        import httpx2

        name = self.name
        if isinstance(exc, anthropic.APIStatusError):
            message = (exc.api_message or exc.message)[:500]
            if exc.status_code == 200:  # an `error` event in the middle of the stream
                kind = exc.type or "unknown_error"
                text = f"{name} stream error ({kind}): {message}"
                if kind in RETRYABLE_STREAM_ERRORS or kind == "unknown_error":
                    return RetryableError(text, code="provider_stream_error")
                return TerminalError(text, code="provider_error")
            status = exc.status_code
            text = f"{name} returned {status}: {message}"
            if status in RETRYABLE_STATUSES:
                retry_after = retry_after_seconds(exc.response.headers)
                return RetryableError(text, code=f"provider_{status}", retry_after=retry_after)
            return TerminalError(text, code="provider_error")
        if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
            return RetryableError(
                f"{name} did not answer within {self.config.timeout_s:g}s", code="provider_timeout"
            )
        if isinstance(exc, anthropic.APIConnectionError):
            cause = exc.__cause__ or exc
            return RetryableError(
                f"{name} is unreachable at {self.config.base_url or 'the default URL'}: {cause}",
                code="provider_unreachable",
            )
        if isinstance(exc, httpx2.TransportError):  # the connection broke mid-stream
            return RetryableError(
                f"{name} dropped the connection mid-stream: {exc}", code="provider_stream_error"
            )
        if isinstance(exc, anthropic.CredentialsError):
            return self._no_credentials(exc)
        if isinstance(exc, anthropic.AnthropicError | httpx2.HTTPError):
            return TerminalError(f"{name} failed: {exc}", code="provider_error")
        return None

    def _no_credentials(self, exc: Exception) -> TerminalError:
        hint = self.config.missing() or "check the provider's credentials"
        return TerminalError(f"{self.name}: {hint} ({exc})", code="provider_error")
