"""The Anthropic provider through the real SDK, over real HTTP, against a fake Messages API.

Each test uses its own first user message, which is the fake's scenario key, so tests share one
fake server without seeing each other's requests.
"""

from __future__ import annotations

import email.utils
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes.anthropic_server import FakeAnthropic
from support import free_port

from cortex_workers.errors import CortexError, RetryableError, TerminalError
from cortex_workers.messages import (
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
from cortex_workers.providers.anthropic_messages import CONTINUATION, AnthropicProvider
from cortex_workers.providers.base import retry_after_seconds
from cortex_workers.providers.config import ProviderConfig


def parse_retry_after(value: str | None) -> float | None:
    return retry_after_seconds({"retry-after": value} if value is not None else {})


API_KEY = "sk-ant-test-key"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    server = FakeAnthropic(api_key=API_KEY)
    server.start()
    yield server
    server.stop()


def make_provider(base_url: str, **overrides: Any) -> AnthropicProvider:
    config: dict[str, Any] = {
        "name": "anthropic",
        "kind": "anthropic",
        "model": "claude-test-1",
        "api_key": API_KEY,
        "base_url": base_url,
        "max_tokens": 321,
        "timeout_s": 10.0,
        **overrides,
    }
    return AnthropicProvider(ProviderConfig(**config))


@pytest.fixture(scope="module")
def provider(fake: FakeAnthropic) -> AnthropicProvider:
    return make_provider(fake.base_url)


def ask(key: str, *more: Message, **request: Any) -> ModelRequest:
    """A request whose first user message (the fake's scenario key) is `key`."""
    request.setdefault("model", "")
    return ModelRequest(messages=(Message("user", key), *more), **request)


def run(provider: AnthropicProvider, request: ModelRequest) -> list[StreamEvent]:
    return list(provider.stream(request))


def run_until_error(
    provider: AnthropicProvider, request: ModelRequest
) -> tuple[list[StreamEvent], CortexError]:
    """The events yielded before the stream raised, and the error."""
    events: list[StreamEvent] = []
    with pytest.raises(CortexError) as info:
        for event in provider.stream(request):
            events.append(event)
    return events, info.value


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# -- streaming -----------------------------------------------------------------------------


def test_streamed_text_arrives_as_several_deltas_that_concatenate_exactly(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    text = "Hello there, world! Ünïcode ✓ and  double  spaces.\nNew line."
    fake.enqueue("say hello", {"text": text})

    events = run(provider, ask("say hello"))

    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) >= 2
    assert text_of(events) == text
    assert isinstance(events[-1], FinishEvent) and events[-1].reason == "stop"
    assert isinstance(events[-2], UsageEvent)


def test_two_parallel_tool_use_blocks_become_two_tool_calls_in_order(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    first = {"city": "Paris", "units": "metric", "days": [1, 2, 3], "nested": {"a": None}}
    second = {"expression": "2 * (3 + 4)"}
    fake.enqueue(
        "weather and maths",
        {
            "text": "Let me check.",
            "tool_calls": [
                {"id": "toolu_01", "name": "weather", "arguments": first},
                {"id": "toolu_02", "name": "calculator", "arguments": second},
            ],
        },
    )

    events = run(provider, ask("weather and maths"))

    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [
        ToolCall("toolu_01", "weather", first),
        ToolCall("toolu_02", "calculator", second),
    ]
    assert text_of(events) == "Let me check."
    assert events[-1] == FinishEvent("tool_calls")


def test_tool_call_with_invalid_json_keeps_the_raw_text_and_empty_json_is_an_empty_object(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.enqueue(
        "broken json",
        {
            "tool_calls": [
                {"id": "toolu_bad", "name": "search", "raw_arguments": '{"query": "unterminated'},
                {"id": "toolu_empty", "name": "now", "raw_arguments": ""},
            ]
        },
    )

    events = run(provider, ask("broken json"))

    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [
        ToolCall("toolu_bad", "search", {"_raw": '{"query": "unterminated'}),
        ToolCall("toolu_empty", "now", {}),
    ]


def test_usage_reports_input_output_and_cache_tokens(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    usage = {"input": 1234, "output": 56, "cache_read": 1000, "cache_write": 200}
    fake.enqueue("count my tokens", {"text": "ok", "usage": usage})

    events = run(provider, ask("count my tokens"))

    assert [e for e in events if isinstance(e, UsageEvent)] == [
        UsageEvent(1234, 56, cache_read_tokens=1000, cache_write_tokens=200)
    ]


def test_max_tokens_stop_reason_finishes_with_length(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.enqueue("go on forever", {"text": "and on and", "stop_reason": "max_tokens"})

    events = run(provider, ask("go on forever"))

    assert events[-1] == FinishEvent("length")


# -- the request ---------------------------------------------------------------------------


def test_request_separates_system_prompt_and_sends_tools_with_input_schema(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    request = ModelRequest(
        model="",
        messages=(
            Message("system", "You are terse."),
            Message("user", "system prompt check"),
            Message("system", "Previous summary:\nnothing yet"),
        ),
        tools=(ToolSpec("search", "Search the web.", schema), ToolSpec("now", "The time.", {})),
    )

    run(provider, request)

    [received] = fake.requests_for("system prompt check")
    body = received.body
    assert received.path == "/v1/messages"
    assert body["system"] == "You are terse.\n\nPrevious summary:\nnothing yet"
    assert body["messages"] == [{"role": "user", "content": "system prompt check"}]
    assert body["tools"] == [
        {"name": "search", "description": "Search the web.", "input_schema": schema},
        {
            "name": "now",
            "description": "The time.",
            "input_schema": {"type": "object", "properties": {}},
        },
    ]
    assert body["model"] == "claude-test-1"
    assert body["max_tokens"] == 321
    assert body["stream"] is True
    assert "temperature" not in body


def test_request_without_system_messages_or_tools_omits_both(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    run(provider, ask("bare request"))

    [received] = fake.requests_for("bare request")
    assert "system" not in received.body
    assert "tools" not in received.body


def test_assistant_tool_use_and_tool_results_merge_into_one_user_message(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    calls = (
        ToolCall("toolu_a", "weather", {"city": "Oslo"}),
        ToolCall("toolu_b", "calculator", {"expression": "1/0"}),
    )
    request = ask(
        "tool round trip",
        Message("assistant", "Checking both.", tool_calls=calls),
        Message("tool", "cloudy, 3°C", tool_call_id="toolu_a", name="weather"),
        Message(
            "tool", "division by zero", tool_call_id="toolu_b", name="calculator", is_error=True
        ),
    )

    run(provider, request)

    [received] = fake.requests_for("tool round trip")
    assert received.body["messages"] == [
        {"role": "user", "content": "tool round trip"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking both."},
                {"type": "tool_use", "id": "toolu_a", "name": "weather", "input": {"city": "Oslo"}},
                {
                    "type": "tool_use",
                    "id": "toolu_b",
                    "name": "calculator",
                    "input": {"expression": "1/0"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_a",
                    "content": "cloudy, 3°C",
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": "division by zero",
                    "is_error": True,
                },
            ],
        },
    ]


def test_same_role_messages_merge_so_roles_alternate_and_an_assistant_start_gets_a_user_turn(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    request = ModelRequest(
        model="",
        messages=(
            Message("assistant", "Earlier answer."),
            Message("assistant", "", tool_calls=(ToolCall("toolu_x", "now", {}),)),
            Message("tool", "12:00", tool_call_id="toolu_x", name="now"),
            Message("user", "first question"),
            Message("user", "second question"),
        ),
    )

    events = run(provider, request)

    [received] = fake.requests_for(CONTINUATION)
    messages = received.body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[0] == {"role": "user", "content": CONTINUATION}
    assert messages[1]["content"] == [
        {"type": "text", "text": "Earlier answer."},
        {"type": "tool_use", "id": "toolu_x", "name": "now", "input": {}},
    ]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_x", "content": "12:00", "is_error": False},
        {"type": "text", "text": "first question"},
        {"type": "text", "text": "second question"},
    ]
    assert text_of(events) == "second question"  # the fake echoes the last user text


def test_tool_results_whose_call_left_the_context_are_sent_as_text_and_open_calls_are_closed(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    request = ModelRequest(
        model="",
        messages=(
            Message("tool", "42", tool_call_id="toolu_gone", name="calculator"),
            Message("user", "orphans"),
            Message("assistant", "", tool_calls=(ToolCall("toolu_open", "now", {}),)),
            Message("user", "never mind"),
        ),
    )

    run(provider, request)  # the fake answers 400 to what the real API rejects

    [received] = fake.requests_for("[tool result of calculator]\n42")
    messages = received.body["messages"]
    assert messages[0]["content"] == [
        {"type": "text", "text": "[tool result of calculator]\n42"},
        {"type": "text", "text": "orphans"},
    ]
    assert messages[2]["content"][0]["tool_use_id"] == "toolu_open"
    assert messages[2]["content"][0]["is_error"] is True
    assert messages[2]["content"][1] == {"type": "text", "text": "never mind"}


def test_temperature_and_max_tokens_of_the_request_reach_the_body(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    run(provider, ask("be creative", temperature=0.3, max_tokens=77, model="claude-other"))

    [received] = fake.requests_for("be creative")
    assert received.body["temperature"] == 0.3
    assert received.body["max_tokens"] == 77
    assert received.body["model"] == "claude-other"


def test_sdk_sends_the_api_key_as_a_bearer_authorization_header(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    run(provider, ask("who am i"))

    [received] = fake.requests_for("who am i")
    assert received.auth == "bearer"
    assert received.headers["authorization"] == f"Bearer {API_KEY}"
    assert "x-api-key" not in received.headers
    assert received.headers["anthropic-version"]


def test_fake_rejects_a_request_without_credentials(fake: FakeAnthropic) -> None:
    body = {
        "model": "m",
        "max_tokens": 5,
        "stream": True,
        "messages": [{"role": "user", "content": "no credentials"}],
    }

    response = httpx.post(f"{fake.base_url}/v1/messages", json=body)

    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


# -- errors --------------------------------------------------------------------------------


def test_rate_limit_is_retryable_with_the_retry_after_seconds_and_is_sent_once(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.enqueue(
        "too fast",
        {
            "status": 429,
            "headers": {"retry-after": "7"},
            "error": {"type": "rate_limit_error", "message": "Number of requests exceeded"},
        },
    )

    _, error = run_until_error(provider, ask("too fast"))

    assert isinstance(error, RetryableError)
    assert error.code == "provider_429"
    assert error.retry_after == 7
    assert "anthropic returned 429: Number of requests exceeded" in str(error)
    assert len(fake.requests_for("too fast")) == 1


@pytest.mark.parametrize("status", [408, 409, 500, 503, 529])
def test_server_errors_and_overload_are_retryable_and_the_sdk_does_not_retry(
    fake: FakeAnthropic, provider: AnthropicProvider, status: int
) -> None:
    key = f"server error {status}"
    fake.enqueue(key, {"status": status})

    _, error = run_until_error(provider, ask(key))

    assert isinstance(error, RetryableError)
    assert error.code == f"provider_{status}"
    assert error.retry_after is None
    assert len(fake.requests_for(key)) == 1


def test_overloaded_529_names_the_overloaded_error(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.enqueue(
        "overloaded",
        {"status": 529, "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )

    _, error = run_until_error(provider, ask("overloaded"))

    assert isinstance(error, RetryableError)
    assert str(error) == "anthropic returned 529: Overloaded"


def test_bad_request_is_terminal_and_names_provider_status_and_server_message(
    fake: FakeAnthropic,
) -> None:
    provider = make_provider(fake.base_url, name="claude-direct")
    fake.enqueue(
        "bad request",
        {
            "status": 400,
            "error": {
                "type": "invalid_request_error",
                "message": "max_tokens: must be at most 8192",
            },
        },
    )

    _, error = run_until_error(provider, ask("bad request"))

    assert isinstance(error, TerminalError)
    assert error.code == "provider_error"
    assert str(error) == "claude-direct returned 400: max_tokens: must be at most 8192"
    assert len(fake.requests_for("bad request")) == 1


def test_wrong_api_key_is_terminal(fake: FakeAnthropic) -> None:
    provider = make_provider(fake.base_url, api_key="sk-ant-wrong")

    _, error = run_until_error(provider, ask("wrong key"))

    assert isinstance(error, TerminalError)
    assert "401" in str(error) and "invalid x-api-key" in str(error)


def test_no_api_key_anywhere_is_terminal(
    fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path))  # no profiles on disk
    provider = make_provider(fake.base_url, api_key=None)

    _, error = run_until_error(provider, ask("no key at all"))

    assert isinstance(error, TerminalError)
    assert "no API key: set ANTHROPIC_API_KEY" in str(error)
    assert fake.requests_for("no key at all") == []


def test_mid_stream_overloaded_error_is_retryable_after_the_text_before_it_was_yielded(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.enqueue("overload midway", {"text": "partial answer", "error_mid_stream": True})

    events, error = run_until_error(provider, ask("overload midway"))

    assert text_of(events) == "partial answer"
    assert isinstance(error, RetryableError)
    assert error.code == "provider_stream_error"
    assert "overloaded_error" in str(error) and "Overloaded" in str(error)


def test_mid_stream_invalid_request_error_is_terminal(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.enqueue(
        "invalid midway",
        {
            "text": "so far",
            "error_mid_stream": True,
            "error": {"type": "invalid_request_error", "message": "prompt is too long"},
        },
    )

    events, error = run_until_error(provider, ask("invalid midway"))

    assert text_of(events) == "so far"
    assert isinstance(error, TerminalError)
    assert "prompt is too long" in str(error)


def test_dropped_connection_mid_stream_is_retryable(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.enqueue("drop midway", {"text": "cut short here", "drop_mid_stream": True})

    events, error = run_until_error(provider, ask("drop midway"))

    assert text_of(events) == "cut short here"
    assert isinstance(error, RetryableError)
    assert error.code == "provider_stream_error"


def test_stream_that_ends_without_message_stop_is_retryable(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.enqueue("truncated", {"text": "incomplete", "truncate_mid_stream": True})

    events, error = run_until_error(provider, ask("truncated"))

    assert not any(isinstance(e, FinishEvent) for e in events)
    assert isinstance(error, RetryableError)
    assert error.code == "provider_stream_error"


def test_no_answer_within_the_timeout_is_retryable_timeout(fake: FakeAnthropic) -> None:
    provider = make_provider(fake.base_url, timeout_s=0.5)
    fake.enqueue("slow start", {"text": "late", "delay_s": 3})

    _, error = run_until_error(provider, ask("slow start"))

    assert isinstance(error, RetryableError)
    assert error.code == "provider_timeout"
    assert len(fake.requests_for("slow start")) == 1


def test_a_stall_mid_stream_beyond_the_timeout_is_retryable_timeout(fake: FakeAnthropic) -> None:
    provider = make_provider(fake.base_url, timeout_s=0.5)
    fake.enqueue("stall midway", {"text": "one two three", "chunk_delay_s": 3})

    _, error = run_until_error(provider, ask("stall midway"))

    assert isinstance(error, RetryableError)
    assert error.code == "provider_timeout"


def test_closed_port_is_retryable_unreachable() -> None:
    provider = make_provider(f"http://127.0.0.1:{free_port()}")

    _, error = run_until_error(provider, ask("anyone there"))

    assert isinstance(error, RetryableError)
    assert error.code == "provider_unreachable"


# -- construction --------------------------------------------------------------------------


def test_the_sdk_client_is_created_once_per_provider_even_across_threads(
    fake: FakeAnthropic,
) -> None:
    provider = make_provider(fake.base_url)
    clients: list[object] = []
    barrier = threading.Barrier(8)

    def grab() -> None:
        barrier.wait()
        clients.append(provider.client())

    threads = [threading.Thread(target=grab) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert len(clients) == 8 and all(c is clients[0] for c in clients)
    assert provider.name == "anthropic"


def test_importing_the_module_does_not_import_the_sdk() -> None:
    code = (
        "import sys, cortex_workers.providers.anthropic_messages as m; "
        "m.AnthropicProvider; assert 'anthropic' not in sys.modules, 'sdk imported'"
    )

    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    in_an_hour = email.utils.formatdate(time.time() + 3600, usegmt=True)

    assert parse_retry_after("7") == 7
    assert parse_retry_after("1.5") == 1.5
    assert 3000 < (parse_retry_after(in_an_hour) or 0) <= 3600
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_a_tool_result_with_images_holds_them_as_image_blocks(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    png = "data:image/png;base64,iVBORw0KGgo="
    request = ask(
        "a chart, please",
        Message("assistant", "", tool_calls=(ToolCall("toolu_c", "chart", {"city": "Oslo"}),)),
        Message("tool", "a chart", tool_call_id="toolu_c", name="chart", images=(png,)),
    )

    run(provider, request)

    [received] = fake.requests_for("a chart, please")
    assert received.body["messages"][-1] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_c",
                "content": [
                    {"type": "text", "text": "a chart"},
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/png",
                            "data": "iVBORw0KGgo=",
                        },
                    },
                ],
                "is_error": False,
            }
        ],
    }
