"""OpenAI Chat Completions: OpenAI, Azure OpenAI, and OpenAI-compatible servers.

One module speaks to `api.openai.com`, Azure OpenAI deployments, and anything that implements
`POST {base_url}/chat/completions` (Ollama's `/v1`, vLLM, llama.cpp's server). Every call
streams (`stream=True` with `stream_options.include_usage`); the SDK's own retries are off
(`max_retries=0`) because our retry policy classifies the errors raised here:

- `RetryableError`: 408/409/429/5xx (`provider_<status>`, with `retry_after` from the
  `retry-after-ms` or `Retry-After` header), timeouts (`provider_timeout`), connection failures
  (`provider_unreachable`), and a stream that fails or stops before it finished
  (`provider_stream_error`).
- `TerminalError` (`provider_error`): any other 4xx, also when it arrives inside the stream.

The SDK is imported on first use, not at import time (it takes about half a second).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from ..errors import CortexError, RetryableError, TerminalError
from ..messages import (
    FinishEvent,
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
    from openai import OpenAI
    from openai.types.chat import (
        ChatCompletionChunk,
        ChatCompletionContentPartParam,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessageFunctionToolCallParam,
        ChatCompletionMessageParam,
    )
    from openai.types.shared_params import ResponseFormatJSONSchema

RETRYABLE_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
PLACEHOLDER_API_KEY = "unused"
"""Sent to keyless OpenAI-compatible servers (Ollama): the SDK insists on some key."""
_FINISH_REASONS: Mapping[str, Literal["stop", "tool_calls", "length"]] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
}


def to_openai_messages(messages: tuple[Message, ...]) -> list[ChatCompletionMessageParam]:
    """Our messages as Chat Completions messages (tool results carry their `tool_call_id`).

    A `tool` message holds text only: the images of a batch's tool results follow its last
    result, as a user message of image parts that names the results they come from."""
    out: list[ChatCompletionMessageParam] = []
    shown: list[Message] = []  # the current batch's results with images
    for m in messages:
        if shown and m.role != "tool":
            out.append(_tool_images(shown))
            shown = []
        if m.role == "tool" and m.images:
            shown.append(m)
        if m.role == "system":
            out.append({"role": "system", "content": m.content})
        elif m.role == "user" and m.images:
            parts: list[ChatCompletionContentPartParam] = (
                [{"type": "text", "text": m.content}] if m.content else []
            )
            parts += [{"type": "image_url", "image_url": {"url": url}} for url in m.images]
            out.append({"role": "user", "content": parts})
        elif m.role == "user":
            out.append({"role": "user", "content": m.content})
        elif m.role == "assistant":
            calls: list[ChatCompletionMessageFunctionToolCallParam] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in m.tool_calls
            ]
            if calls:
                out.append({"role": "assistant", "content": m.content or None, "tool_calls": calls})
            else:
                out.append({"role": "assistant", "content": m.content})
        else:
            content = f"ERROR: {m.content}" if m.is_error else m.content
            out.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": content})
    if shown:
        out.append(_tool_images(shown))
    return out


def _tool_images(results: list[Message]) -> ChatCompletionMessageParam:
    """The images of tool results, as the user message that follows them."""
    parts: list[ChatCompletionContentPartParam] = []
    for m in results:
        text = f"The images of the result of {m.name or 'a tool'} ({m.tool_call_id}):"
        parts.append({"type": "text", "text": text})
        parts += [{"type": "image_url", "image_url": {"url": url}} for url in m.images]
    return {"role": "user", "content": parts}


def to_openai_tools(tools: tuple[ToolSpec, ...]) -> list[ChatCompletionFunctionToolParam]:
    """Our tools as Chat Completions function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": dict[str, object](t.parameters),
            },
        }
        for t in tools
    ]


def response_format(request: ModelRequest) -> ResponseFormatJSONSchema | None:
    """Structured output: the answer must be JSON following the request's `result_schema`."""
    if request.result_schema is None:
        return None
    return {
        "type": "json_schema",
        "json_schema": {
            "name": "result",
            "schema": dict[str, object](request.result_schema),
            "strict": False,
        },
    }


def uses_max_completion_tokens(config: ProviderConfig) -> bool:
    """OpenAI itself and Azure want `max_completion_tokens` (`max_tokens` is deprecated there
    and rejected by reasoning models); other OpenAI-compatible servers know `max_tokens`."""
    if config.kind == "azure_openai" or not config.base_url:
        return True
    host = urlsplit(config.base_url).hostname or ""
    return host == "openai.com" or host.endswith(".openai.com")


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


class _ToolCallAccumulator:
    """Tool-call deltas gathered by index: id and name come first, arguments in fragments."""

    def __init__(self) -> None:
        self._calls: dict[int, _PartialCall] = {}

    def add(self, index: int, call_id: str | None, name: str | None, arguments: str | None) -> None:
        call = self._calls.setdefault(index, _PartialCall())
        if call_id and not call.id:
            call.id = call_id
        if name and not call.name:
            call.name = name
        if arguments:
            call.arguments += arguments

    def __bool__(self) -> bool:
        return bool(self._calls)

    def calls(self) -> list[ToolCall]:
        return [
            ToolCall(c.id or f"call_{uuid.uuid4().hex[:24]}", c.name, parse_arguments(c.arguments))
            for _, c in sorted(self._calls.items())
        ]


def _status_message(err: Any) -> str:
    """The server's own error message from an `APIStatusError`."""
    body = err.body
    if isinstance(body, Mapping) and isinstance(body.get("message"), str) and body["message"]:
        return str(body["message"])
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return str(err.message)


def _embedded_status(body: object) -> int | None:
    """A 4xx/5xx status carried in an in-stream error object (`code` or `status`), if any."""
    if not isinstance(body, Mapping):
        return None
    for key in ("status", "code"):
        value = body.get(key)
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and 400 <= value <= 599:
            return value
    return None


def classify_error(name: str, err: Exception, *, mid_stream: bool = False) -> CortexError:
    """An SDK (or decoding) exception as our `RetryableError` / `TerminalError`."""
    import openai

    if isinstance(err, openai.APIStatusError):
        status = err.status_code
        message = f"{name} returned {status}: {_status_message(err)}"
        if status in RETRYABLE_STATUSES:
            retry_after = retry_after_seconds(err.response.headers)
            return RetryableError(message, code=f"provider_{status}", retry_after=retry_after)
        return TerminalError(message, code="provider_error")
    if isinstance(err, openai.APITimeoutError):
        return RetryableError(f"{name} timed out: {err.message}", code="provider_timeout")
    if isinstance(err, openai.APIConnectionError):
        cause = f" ({err.__cause__})" if err.__cause__ else ""
        if mid_stream:
            return RetryableError(
                f"{name} stream broke off: {err.message}{cause}", code="provider_stream_error"
            )
        return RetryableError(
            f"{name} is unreachable: {err.message}{cause}", code="provider_unreachable"
        )
    if isinstance(err, openai.APIError):
        # An `{"error": {...}}` object inside the stream: the SDK raises a bare APIError.
        embedded = _embedded_status(err.body)
        if embedded is not None and embedded not in RETRYABLE_STATUSES:
            return TerminalError(
                f"{name} returned {embedded} mid-stream: {err.message}", code="provider_error"
            )
        return RetryableError(
            f"{name} sent an error mid-stream: {err.message}", code="provider_stream_error"
        )
    if isinstance(err, ValueError):  # undecodable stream data (JSON or UTF-8)
        return RetryableError(
            f"{name} sent an unreadable stream: {err}", code="provider_stream_error"
        )
    return TerminalError(f"{name} client error: {err}", code="provider_error")


class OpenAIChatProvider:
    """Streams Chat Completions from an OpenAI, Azure OpenAI or OpenAI-compatible server."""

    def __init__(self, config: ProviderConfig) -> None:
        self.name = config.name
        self.config = config
        self._client_instance: OpenAI | None = None
        self._lock = threading.Lock()

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """Text deltas as they arrive, then tool calls (index order), usage and the finish."""
        import openai

        config = self.config
        model = config.model if config.kind == "azure_openai" else request.model or config.model
        limit = request.max_tokens or config.max_tokens
        completion_limit = uses_max_completion_tokens(config)
        tools = to_openai_tools(request.tools)
        try:
            client = self._client()
        except (openai.OpenAIError, ValueError) as err:
            raise TerminalError(
                f"{self.name} is misconfigured: {err}", code="provider_error"
            ) from err
        try:
            sdk_stream = client.chat.completions.create(
                model=model,
                messages=to_openai_messages(request.messages),
                stream=True,
                stream_options={"include_usage": True},
                max_completion_tokens=limit if completion_limit else openai.omit,
                max_tokens=openai.omit if completion_limit else limit,
                temperature=openai.omit if request.temperature is None else request.temperature,
                tools=tools if tools else openai.omit,
                response_format=response_format(request) or openai.omit,
            )
        except openai.OpenAIError as err:
            raise classify_error(self.name, err) from err
        with sdk_stream:
            try:
                yield from self._events(sdk_stream)
            except (openai.OpenAIError, ValueError) as err:
                raise classify_error(self.name, err, mid_stream=True) from err

    def _events(self, chunks: Iterator[ChatCompletionChunk]) -> Iterator[StreamEvent]:
        calls = _ToolCallAccumulator()
        usage: UsageEvent | None = None
        finish: str | None = None
        for chunk in chunks:
            if chunk.usage is not None:
                details = chunk.usage.prompt_tokens_details
                usage = UsageEvent(
                    chunk.usage.prompt_tokens or 0,
                    chunk.usage.completion_tokens or 0,
                    cache_read_tokens=(details.cached_tokens or 0) if details else 0,
                    cache_write_tokens=(details.cache_write_tokens or 0) if details else 0,
                )
            for choice in chunk.choices or ():
                if getattr(choice, "index", 0):  # only one choice is asked for (n=1)
                    continue
                delta = choice.delta
                if delta is not None:
                    if delta.content:
                        yield TextDelta(delta.content)
                    if delta.refusal:
                        yield TextDelta(delta.refusal)
                    for position, tc in enumerate(delta.tool_calls or ()):
                        raw_index = getattr(tc, "index", None)
                        index = raw_index if isinstance(raw_index, int) else position
                        fn = tc.function
                        calls.add(
                            index,
                            tc.id,
                            fn.name if fn else None,
                            fn.arguments if fn else None,
                        )
                if choice.finish_reason:
                    finish = choice.finish_reason
        if finish is None:
            raise RetryableError(
                f"{self.name} stream ended before the model finished", code="provider_stream_error"
            )
        for call in calls.calls():
            yield ToolCallEvent(call)
        if usage is not None:
            yield usage
        reason = _FINISH_REASONS.get(finish, "stop")
        if calls and reason == "stop":
            reason = "tool_calls"
        yield FinishEvent(reason)

    def warm(self) -> None:
        """The client, its chat resource and the stream's types, built ahead of the first call."""
        import openai.lib.streaming.chat  # noqa: F401 (imported for its side effect: loading)

        _ = self._client().chat.completions

    def _client(self) -> OpenAI:
        """The SDK client, created on first use (one per provider, shared by all threads)."""
        client = self._client_instance
        if client is not None:
            return client
        with self._lock:
            if self._client_instance is None:
                self._client_instance = self._make_client()
            return self._client_instance

    def _make_client(self) -> OpenAI:
        import openai

        config = self.config
        headers = dict(config.extra_headers) or None
        if config.kind == "azure_openai":
            return openai.AzureOpenAI(
                azure_endpoint=config.base_url or "",
                azure_deployment=config.model,
                api_key=config.api_key,
                api_version=config.api_version,
                max_retries=0,
                timeout=config.timeout_s,
                default_headers=headers,
            )
        api_key = config.api_key
        if api_key is None and config.base_url:
            api_key = PLACEHOLDER_API_KEY
        return openai.OpenAI(
            api_key=api_key,
            base_url=config.base_url,
            max_retries=0,
            timeout=config.timeout_s,
            default_headers=headers,
        )

    def close(self) -> None:
        """Close the SDK client's connections; a later call creates a new client."""
        with self._lock:
            client, self._client_instance = self._client_instance, None
        if client is not None:
            client.close()
