"""The OpenAI Chat Completions provider, through the real SDK over HTTP against FakeOpenAI."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from types import GeneratorType
from typing import Any

import pytest
from fakes.openai_server import FakeOpenAI
from fakes.sse_server import Frame, RecordedRequest

from cortex_workers.errors import RetryableError, TerminalError
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
from cortex_workers.providers.base import collect
from cortex_workers.providers.base import retry_after_seconds as parse_retry_after
from cortex_workers.providers.config import ProviderConfig
from cortex_workers.providers.openai_chat import OpenAIChatProvider, uses_max_completion_tokens

KINDS = ["openai", "azure_openai"]
DEPLOYMENT = "gpt-4o-deployment"
WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def strict_fake() -> Iterator[FakeOpenAI]:
    """A server that accepts only the key `sk-right`."""
    server = FakeOpenAI(api_key="sk-right")
    server.start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def fakes_did_not_fail(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    for name in ("fake", "strict_fake"):
        if name in request.fixturenames:
            server = request.getfixturevalue(name)
            assert server.failures == [], server.failures


@pytest.fixture
def providers() -> Iterator[list[OpenAIChatProvider]]:
    made: list[OpenAIChatProvider] = []
    yield made
    for p in made:
        p.close()


def config_for(kind: str, base_url: str, **overrides: Any) -> ProviderConfig:
    if kind == "azure_openai":
        config = ProviderConfig(
            name="azure_openai",
            kind="azure_openai",
            model=DEPLOYMENT,
            api_key="azure-key",
            base_url=base_url,
            api_version="2024-10-21",
            timeout_s=10.0,
        )
    else:
        config = ProviderConfig(
            name="openai",
            kind="openai",
            model="gpt-4o-mini",
            api_key="sk-test",
            base_url=f"{base_url}/v1",
            timeout_s=10.0,
        )
    return replace(config, **overrides)


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make(
    fake: FakeOpenAI, providers: list[OpenAIChatProvider], kind: str
) -> Callable[..., OpenAIChatProvider]:
    """A provider of the parametrized kind talking to `fake` (config overrides as kwargs)."""

    def build(base_url: str | None = None, **overrides: Any) -> OpenAIChatProvider:
        provider = OpenAIChatProvider(config_for(kind, base_url or fake.base_url, **overrides))
        providers.append(provider)
        return provider

    return build


def unique(label: str) -> str:
    return f"{label} [{uuid.uuid4().hex[:12]}]"


def ask(text: str, **kwargs: Any) -> ModelRequest:
    return ModelRequest(model="", messages=(Message("user", text),), **kwargs)


def run(provider: OpenAIChatProvider, request: ModelRequest) -> list[StreamEvent]:
    return list(provider.stream(request))


def run_until_error(
    provider: OpenAIChatProvider, request: ModelRequest, error: type[Exception]
) -> tuple[list[StreamEvent], Any]:
    """The events yielded before the stream raised `error`, and the error."""
    events: list[StreamEvent] = []
    with pytest.raises(error) as info:
        for event in provider.stream(request):
            events.append(event)
    return events, info.value


def texts(events: list[StreamEvent]) -> list[str]:
    return [e.text for e in events if isinstance(e, TextDelta)]


# --- streaming ---------------------------------------------------------------------------------


def test_streamed_text_arrives_as_several_deltas_that_concatenate_exactly(
    fake: FakeOpenAI, make: Callable[..., OpenAIChatProvider]
) -> None:
    key = unique("tell me a story")
    story = "Once upon a time,  a  lighthouse keeper\nfound a bottle: «héllo» — 42 words later."
    fake.enqueue(key, {"text": story})

    events = run(make(), ask(key))

    deltas = texts(events)
    assert len(deltas) > 5
    assert "".join(deltas) == story
    assert isinstance(events[-1], FinishEvent) and events[-1].reason == "stop"


def test_without_a_scenario_the_server_echoes_the_last_user_message(
    make: Callable[..., OpenAIChatProvider],
) -> None:
    key = unique("echo me please")
    assert collect(make().stream(ask(key))).text == key


def test_parallel_tool_calls_with_interleaved_fragments_come_out_in_index_order(
    fake: FakeOpenAI, make: Callable[..., OpenAIChatProvider]
) -> None:
    key = unique("weather in two cities")
    fake.enqueue(
        key,
        {
            "text": "Checking both.",
            "tool_calls": [
                {
                    "id": "call_paris",
                    "name": "get_weather",
                    "arguments": {"city": "Paris", "units": "metric", "days": [1, 2]},
                },
                {"id": "call_tokyo", "name": "get_time", "arguments": {"zone": "Asia/Tokyo"}},
            ],
        },
    )

    events = run(make(), ask(key, tools=(WEATHER,)))

    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [
        ToolCall("call_paris", "get_weather", {"city": "Paris", "units": "metric", "days": [1, 2]}),
        ToolCall("call_tokyo", "get_time", {"zone": "Asia/Tokyo"}),
    ]
    assert "".join(texts(events)) == "Checking both."
    assert isinstance(events[-1], FinishEvent) and events[-1].reason == "tool_calls"


def test_tool_calls_without_text_and_with_empty_arguments(
    fake: FakeOpenAI, make: Callable[..., OpenAIChatProvider]
) -> None:
    key = unique("what time is it")
    fake.enqueue(key, {"tool_calls": [{"id": "call_now", "name": "now", "arguments": {}}]})

    completion = collect(make().stream(ask(key)))

    assert completion.text == ""
    assert completion.tool_calls == [ToolCall("call_now", "now", {})]
    assert completion.finish_reason == "tool_calls"


def test_invalid_json_arguments_come_out_raw(
    fake: FakeOpenAI, make: Callable[..., OpenAIChatProvider]
) -> None:
    key = unique("broken arguments")
    fake.enqueue(
        key,
        {
            "tool_calls": [
                {"id": "call_bad", "name": "get_weather", "arguments": '{"city": "Par'},
                {"id": "call_list", "name": "get_weather", "arguments": "[1, 2]"},
            ]
        },
    )

    completion = collect(make().stream(ask(key)))

    assert completion.tool_calls == [
        ToolCall("call_bad", "get_weather", {"_raw": '{"city": "Par'}),
        ToolCall("call_list", "get_weather", {"_raw": "[1, 2]"}),
    ]


def test_usage_reports_input_output_and_cached_tokens(
    fake: FakeOpenAI, make: Callable[..., OpenAIChatProvider]
) -> None:
    key = unique("count my tokens")
    fake.enqueue(key, {"text": "Sure.", "usage": {"input": 1234, "output": 56, "cached": 1024}})

    events = run(make(), ask(key))

    usage = [e for e in events if isinstance(e, UsageEvent)]
    assert usage == [UsageEvent(1234, 56, cache_read_tokens=1024)]
    assert isinstance(events[-1], FinishEvent)


@pytest.mark.parametrize(
    ("server_reason", "ours"), [("length", "length"), ("content_filter", "stop")]
)
def test_finish_reasons_map_to_ours(
    fake: FakeOpenAI, make: Callable[..., OpenAIChatProvider], server_reason: str, ours: str
) -> None:
    key = unique(f"finish {server_reason}")
    fake.enqueue(key, {"text": "Cut", "finish_reason": server_reason})

    assert collect(make().stream(ask(key))).finish_reason == ours


# --- the request on the wire -------------------------------------------------------------------


def test_request_carries_mapped_messages_tools_and_stream_options(
    fake: FakeOpenAI, make: Callable[..., OpenAIChatProvider], kind: str
) -> None:
    key = unique("plan my trip")
    messages = (
        Message("system", "You are a travel agent."),
        Message("user", key),
        Message(
            "assistant",
            "",
            tool_calls=(
                ToolCall("call_1", "get_weather", {"city": "Oslo"}),
                ToolCall("call_2", "get_weather", {"city": "Rome"}),
            ),
        ),
        Message("tool", "12°C, rain", tool_call_id="call_1", name="get_weather"),
        Message("tool", "city not found", tool_call_id="call_2", name="get_weather", is_error=True),
        Message("assistant", "Oslo is rainy."),
        Message("user", "And tomorrow?"),
    )
    provider = make()

    completion = collect(
        provider.stream(
            ModelRequest(
                model="gpt-4.1",
                messages=messages,
                tools=(WEATHER,),
                temperature=0.25,
                max_tokens=321,
            )
        )
    )

    assert completion.text == "And tomorrow?"
    [sent] = fake.requests_for(key)
    body = sent.body
    assert body["messages"] == [
        {"role": "system", "content": "You are a travel agent."},
        {"role": "user", "content": key},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "12°C, rain"},
        {"role": "tool", "tool_call_id": "call_2", "content": "ERROR: city not found"},
        {"role": "assistant", "content": "Oslo is rainy."},
        {"role": "user", "content": "And tomorrow?"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": WEATHER.description,
                "parameters": WEATHER.parameters,
            },
        }
    ]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.25
    if kind == "azure_openai":
        assert sent.path == f"/openai/deployments/{DEPLOYMENT}/chat/completions"
        assert sent.query["api-version"] == "2024-10-21"
        assert sent.headers["api-key"] == "azure-key"
        assert body["model"] == DEPLOYMENT
        assert body["max_completion_tokens"] == 321 and "max_tokens" not in body
    else:
        assert sent.path == "/v1/chat/completions"
        assert sent.headers["authorization"] == "Bearer sk-test"
        assert body["model"] == "gpt-4.1"
        assert body["max_tokens"] == 321 and "max_completion_tokens" not in body


def test_defaults_fill_model_and_token_limit_and_omit_temperature_and_tools(
    fake: FakeOpenAI, make: Callable[..., OpenAIChatProvider], kind: str
) -> None:
    key = unique("defaults please")
    provider = make(max_tokens=777, extra_headers={"X-Team": "cortex"})

    run(provider, ask(key))

    [sent] = fake.requests_for(key)
    limit_field = "max_completion_tokens" if kind == "azure_openai" else "max_tokens"
    assert sent.body[limit_field] == 777
    assert sent.body["model"] == provider.config.model
    assert "temperature" not in sent.body and "tools" not in sent.body
    assert sent.headers["x-team"] == "cortex"


def test_openai_itself_gets_max_completion_tokens_and_local_servers_max_tokens() -> None:
    openai = ProviderConfig(name="openai", kind="openai", model="gpt-5", api_key="k")
    assert uses_max_completion_tokens(openai)
    assert uses_max_completion_tokens(replace(openai, base_url="https://api.openai.com/v1"))
    assert not uses_max_completion_tokens(replace(openai, base_url="http://localhost:11434/v1"))
    azure = ProviderConfig(name="az", kind="azure_openai", model="d", base_url="https://x")
    assert uses_max_completion_tokens(azure)


def test_ollama_style_config_without_key_sends_a_placeholder_and_works(
    fake: FakeOpenAI, providers: list[OpenAIChatProvider]
) -> None:
    config = ProviderConfig(
        name="ollama", kind="openai", model="llama3.2", base_url=f"{fake.base_url}/v1", free=True
    )
    provider = OpenAIChatProvider(config)
    providers.append(provider)
    key = unique("hello local model")
    fake.enqueue(key, {"text": "Hi from llama."})

    completion = collect(provider.stream(ask(key)))

    assert completion.text == "Hi from llama."
    [sent] = fake.requests_for(key)
    assert sent.headers["authorization"] == "Bearer unused"
    assert sent.body["model"] == "llama3.2"


def test_one_client_serves_concurrent_streams_from_many_threads(
    fake: FakeOpenAI, make: Callable[..., OpenAIChatProvider]
) -> None:
    provider = make()
    keys = [unique(f"thread {i}") for i in range(8)]
    for key in keys:
        fake.enqueue(key, {"text": f"answer to {key}", "chunk_delay_s": 0.01})

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda k: collect(provider.stream(ask(k))).text, keys))

    assert answers == [f"answer to {k}" for k in keys]
    assert provider._client() is provider._client()


# --- errors --------------------------------------------------------------------------------------


def test_rate_limit_429_is_retryable_with_retry_after_and_no_sdk_retry(
    fake: FakeOpenAI, make: Callable[..., OpenAIChatProvider]
) -> None:
    key = unique("too many requests")
    fake.enqueue(
        key,
        {
            "status": 429,
            "headers": {"retry-after": "7"},
            "error": {"message": "Rate limit reached for gpt-4o-mini"},
        },
    )
    provider = make()

    _, err = run_until_error(provider, ask(key), RetryableError)

    assert err.code == "provider_429"
    assert err.retry_after == 7
    assert f"{provider.name} returned 429" in err.message
    assert "Rate limit reached for gpt-4o-mini" in err.message
    assert len(fake.requests_for(key)) == 1


def test_server_error_500_is_retryable_after_exactly_one_request(
    fake: FakeOpenAI, make: Callable[..., OpenAIChatProvider]
) -> None:
    key = unique("server falls over")
    fake.enqueue(key, {"status": 500})

    _, err = run_until_error(make(), ask(key), RetryableError)

    assert err.code == "provider_500"
    assert err.retry_after is None
    assert len(fake.requests_for(key)) == 1


def test_retry_after_ms_header_is_read_in_seconds(
    fake: FakeOpenAI, make: Callable[..., OpenAIChatProvider]
) -> None:
    key = unique("overloaded")
    fake.enqueue(key, {"status": 503, "headers": {"retry-after-ms": "1500"}})

    _, err = run_until_error(make(), ask(key), RetryableError)

    assert (err.code, err.retry_after) == ("provider_503", 1.5)


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after({"retry-after": "7"}) == 7
    assert parse_retry_after({"retry-after": later}, now=now.timestamp()) == 30
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_400_is_terminal_and_names_provider_status_and_server_message(
    fake: FakeOpenAI, make: Callable[..., OpenAIChatProvider]
) -> None:
    key = unique("bad request")
    server_message = "This model's maximum context length is 128000 tokens."
    fake.enqueue(
        key,
        {"status": 400, "error": {"message": server_message, "code": "context_length_exceeded"}},
    )
    provider = make()

    _, err = run_until_error(provider, ask(key), TerminalError)

    assert err.code == "provider_error"
    assert err.message == f"{provider.name} returned 400: {server_message}"
    assert len(fake.requests_for(key)) == 1


def test_wrong_api_key_401_is_terminal(
    strict_fake: FakeOpenAI, providers: list[OpenAIChatProvider], kind: str
) -> None:
    provider = OpenAIChatProvider(config_for(kind, strict_fake.base_url, api_key="sk-wrong"))
    providers.append(provider)
    key = unique("let me in")

    _, err = run_until_error(provider, ask(key), TerminalError)

    assert err.code == "provider_error"
    assert f"{provider.name} returned 401" in err.message
    assert len(strict_fake.requests_for(key)) == 1


def test_right_api_key_is_accepted(
    strict_fake: FakeOpenAI, providers: list[OpenAIChatProvider], kind: str
) -> None:
    provider = OpenAIChatProvider(config_for(kind, strict_fake.base_url, api_key="sk-right"))
    providers.append(provider)
    key = unique("the right key")

    assert collect(provider.stream(ask(key))).text == key


def test_error_inside_the_stream_is_retryable_after_the_text_before_it(
    fake: FakeOpenAI, make: Callable[..., OpenAIChatProvider]
) -> None:
    key = unique("fails halfway")
    fake.enqueue(
        key,
        {
            "text": "The first half arrives and then the rest never does.",
            "error_mid_stream": True,
            "error": {"message": "The server had an error processing your request."},
        },
    )

    events, err = run_until_error(make(), ask(key), RetryableError)

    assert texts(events) and "The first half arrives and then the rest never does.".startswith(
        "".join(texts(events))
    )
    assert err.code == "provider_stream_error"
    assert "The server had an error processing your request." in err.message


def test_a_4xx_error_inside_the_stream_is_terminal(
    fake: FakeOpenAI, make: Callable[..., OpenAIChatProvider]
) -> None:
    key = unique("vllm rejects mid-stream")
    fake.enqueue(
        key,
        {
            "text": "Partial answer here",
            "error_mid_stream": True,
            "error": {"message": "prompt too long", "type": "BadRequestError", "code": 400},
        },
    )
    provider = make()

    events, err = run_until_error(provider, ask(key), TerminalError)

    assert texts(events)
    assert err.code == "provider_error"
    assert f"{provider.name} returned 400" in err.message and "prompt too long" in err.message


def test_dropped_connection_mid_stream_is_retryable(
    fake: FakeOpenAI, make: Callable[..., OpenAIChatProvider]
) -> None:
    key = unique("connection drops")
    fake.enqueue(
        key, {"text": "Some words stream out before the line goes dead.", "drop_mid_stream": True}
    )

    events, err = run_until_error(make(), ask(key), RetryableError)

    assert texts(events)
    assert err.code == "provider_stream_error"
    assert not any(isinstance(e, FinishEvent) for e in events)


def test_server_slower_than_the_timeout_is_retryable_provider_timeout(
    fake: FakeOpenAI, make: Callable[..., OpenAIChatProvider]
) -> None:
    key = unique("slow server")
    fake.enqueue(key, {"text": "too late", "delay_s": 3.0})

    _, err = run_until_error(make(timeout_s=0.5), ask(key), RetryableError)

    assert err.code == "provider_timeout"
    assert len(fake.requests_for(key)) == 1


def test_connection_refused_is_retryable_provider_unreachable(
    make: Callable[..., OpenAIChatProvider],
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"

    _, err = run_until_error(make(base_url=closed), ask(unique("anyone there")), RetryableError)

    assert err.code == "provider_unreachable"


def test_sdk_exceptions_never_escape_a_misconfigured_provider(
    providers: list[OpenAIChatProvider],
) -> None:
    config = ProviderConfig(
        name="azure_openai",
        kind="azure_openai",
        model="d",
        api_key="k",
        base_url="http://127.0.0.1:9",
        api_version=None,
    )
    provider = OpenAIChatProvider(config)
    providers.append(provider)

    _, err = run_until_error(provider, ask(unique("misconfigured")), TerminalError)

    assert "azure_openai is misconfigured" in err.message


class EndsEarly(FakeOpenAI):
    """Ends the response body cleanly after a few chunks: no finish_reason, no [DONE]."""

    def stream_frames(self, request: RecordedRequest, response: dict[str, Any]) -> Iterator[Frame]:
        yield from list(super().stream_frames(request, response))[:3]


def test_a_stream_that_ends_before_the_finish_is_retryable(
    providers: list[OpenAIChatProvider], kind: str
) -> None:
    with EndsEarly() as server:
        provider = OpenAIChatProvider(config_for(kind, server.base_url))
        providers.append(provider)
        key = unique("cut short")
        server.enqueue(key, {"text": "one two three four five six"})

        events, err = run_until_error(provider, ask(key), RetryableError)

    assert texts(events)
    assert err.code == "provider_stream_error"


def test_abandoning_a_stream_early_leaves_the_provider_usable(
    fake: FakeOpenAI, make: Callable[..., OpenAIChatProvider]
) -> None:
    provider = make()
    key = unique("long answer")
    fake.enqueue(key, {"text": "word " * 200})

    stream = provider.stream(ask(key))
    assert isinstance(stream, GeneratorType)
    assert isinstance(next(stream), TextDelta)
    stream.close()

    again = unique("after abandoning")
    assert collect(provider.stream(ask(again))).text == again


def test_tool_result_images_follow_the_batch_as_a_user_message(
    fake: FakeOpenAI, make: Callable[..., OpenAIChatProvider], kind: str
) -> None:
    key = unique("a chart")
    png = "data:image/png;base64,iVBORw0KGgo="
    messages = (
        Message("user", key),
        Message(
            "assistant",
            "",
            tool_calls=(
                ToolCall("call_1", "chart", {"city": "Oslo"}),
                ToolCall("call_2", "get_weather", {"city": "Oslo"}),
            ),
        ),
        Message("tool", "a chart", tool_call_id="call_1", name="chart", images=(png,)),
        Message("tool", "12°C", tool_call_id="call_2", name="get_weather"),
    )

    collect(make().stream(ModelRequest(model="gpt-4.1", messages=messages, tools=(WEATHER,))))

    [sent] = fake.requests_for(key)
    # a tool message holds text only: every result of the batch first, then the images
    assert sent.body["messages"][2:] == [
        {"role": "tool", "tool_call_id": "call_1", "content": "a chart"},
        {"role": "tool", "tool_call_id": "call_2", "content": "12°C"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "The images of the result of chart (call_1):"},
                {"type": "image_url", "image_url": {"url": png}},
            ],
        },
    ]
