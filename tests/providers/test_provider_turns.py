"""Whole turns on real provider SDKs, through the real pipeline, against wire-level fakes."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from support import Api, Fakes, stored_text, text_of

TWO_TOOLS = {
    "text": "Let me check both.",
    "tool_calls": [
        {"name": "calculate", "arguments": {"expression": "6*7"}},
        {"name": "current_time", "arguments": {}},
    ],
}
FINAL = {"text": "Six times seven is 42."}
PROVIDERS = {
    "openai": ("openai", "gpt-4o"),
    "azure_openai": ("openai", "test-deployment"),
    "ollama": ("openai", "llama3.1:8b"),
    "anthropic": ("anthropic", "claude-sonnet-4-5"),
}


def _fake(fakes: Fakes, family: str) -> Any:
    return fakes.anthropic if family == "anthropic" else fakes.openai


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_a_turn_with_two_tool_calls_completes_on_each_provider(
    client: Api, fakes: Fakes, provider: str
) -> None:
    family, model = PROVIDERS[provider]
    content = f"what is 6*7 and the time? {uuid.uuid4()}"
    usage = (
        {"input": 120, "output": 30}
        if family == "openai"
        else {"input": 120, "output": 30, "cache_read": 64, "cache_write": 0}
    )
    # by position, not from a queue: a step delivered again (its lease lapsed on a loaded
    # machine) is a legitimate restart and must get the same answer as its first attempt
    _fake(fakes, family).answer_by_position(
        content, {**TWO_TOOLS, "usage": usage}, {**FINAL, "usage": usage}
    )
    sid = client.create_session(provider=provider, model=model)["id"]
    tid = client.submit(sid, content)
    events = client.turn_events(tid)
    kinds = [e.event for e in events]
    assert kinds[-1] == "done" and events[-1].data["status"] == "done", events[-3:]
    assert kinds.count("tool_call") == 2 and kinds.count("tool_result") == 2
    results = [e.data for e in events if e.event == "tool_result"]
    assert {r["name"] for r in results} == {"calculate", "current_time"}
    assert not any(r["is_error"] for r in results)
    turn = client.wait_turn(tid)
    assert turn["answer"] == FINAL["text"]
    assert (
        text_of(events)
        == stored_text(client.messages(sid), tid)
        == (TWO_TOOLS["text"] + FINAL["text"])
    )
    model_steps = [s for s in turn["steps"] if s["kind"] == "model"]
    assert [s["provider"] for s in model_steps] == [provider, provider]
    assert all(
        s["usage"]["input_tokens"] == 120 and s["usage"]["output_tokens"] == 30 for s in model_steps
    )
    assert turn["usage"] == {**turn["usage"], "input_tokens": 240, "output_tokens": 60}
    if provider == "openai":  # gpt-4o is priced: 2.50 / 10.00 USD per million tokens
        assert turn["cost_usd"] == pytest.approx(2 * (120 * 2.5 + 30 * 10.0) / 1e6)
    if family == "anthropic":
        assert model_steps[0]["usage"]["cache_read_tokens"] == 64
    # the provider received the tool results of the first call in the second request
    second = _fake(fakes, family).requests_for(content)[-1].body
    wire = str(second["messages"])
    assert "call_" in wire or "toolu_" in wire or "tool_use_id" in wire
    assert '{"result": 42}' in wire or "'result': 42" in wire or "result" in wire


def test_a_provider_rejecting_the_request_fails_the_turn_naming_it(
    client: Api, fakes: Fakes
) -> None:
    content = f"bad request {uuid.uuid4()}"
    fakes.anthropic.enqueue(
        content,
        {
            "status": 400,
            "error": {"type": "invalid_request_error", "message": "max_tokens: too large"},
        },
    )
    sid = client.create_session(provider="anthropic", model="claude-sonnet-4-5")["id"]
    tid = client.submit(sid, content)
    events = client.turn_events(tid)
    error = next(e.data for e in events if e.event == "error")
    assert "anthropic" in error["message"] and "400" in error["message"]
    assert "max_tokens: too large" in error["message"]
    assert client.wait_turn(tid)["status"] == "failed"
    assert len(fakes.anthropic.requests_for(content)) == 1  # not retried


def test_a_rate_limited_provider_is_retried_after_its_retry_after(
    client: Api, fakes: Fakes
) -> None:
    content = f"busy {uuid.uuid4()}"
    fakes.openai.enqueue(
        content,
        {
            "status": 429,
            "headers": {"retry-after": "1"},
            "error": {"message": "slow down", "type": "rate_limit"},
        },
        {"text": "there you go"},
    )
    sid = client.create_session(provider="openai", model="gpt-4o-mini")["id"]
    tid = client.submit(sid, content)
    turn = client.wait_turn(tid)
    assert turn["status"] == "done" and turn["answer"] == "there you go"
    assert turn["steps"][0]["attempt"] == 2
    events = client.turn_events(tid)
    assert any(e.event == "step_restart" for e in events)


def test_an_outage_of_the_primary_completes_the_turn_on_its_backup(
    client: Api, fakes: Fakes
) -> None:
    content = f"outage {uuid.uuid4()}"
    down = {"status": 503, "error": {"message": "upstream unavailable", "type": "server_error"}}
    fakes.openai.enqueue(content, down, down, down)
    fakes.anthropic.enqueue(content, {"text": "answered by the backup"})
    sid = client.create_session(model="gpt-fallback-test")["id"]
    tid = client.submit(sid, content)
    turn = client.wait_turn(tid, timeout=60)
    assert turn["status"] == "done" and turn["answer"] == "answered by the backup"
    step = turn["steps"][0]
    assert (step["provider"], step["model"]) == ("anthropic", "claude-backup-test")
    assert step["fallback_from"] == "openai:gpt-fallback-test"
    assert len(fakes.openai.requests_for(content)) == 2  # two attempts on the primary, then backup
    # the primary kept failing, so it cools down for every worker, and the API says why
    providers = {p["name"]: p for p in client.http.get("/v1/providers").json()}
    assert providers["openai"]["cooldown"] is not None
    assert "upstream unavailable" in providers["openai"]["cooldown"]["reason"]
    # while it cools down, new turns on that model go straight to the backup
    content2 = f"outage again {uuid.uuid4()}"
    fakes.anthropic.enqueue(content2, {"text": "straight to the backup"})
    sid2 = client.create_session(model="gpt-fallback-test")["id"]
    turn2 = client.wait_turn(client.submit(sid2, content2))
    assert turn2["answer"] == "straight to the backup"
    assert turn2["steps"][0]["attempt"] == 1 and not fakes.openai.requests_for(content2)
    from cortex_workers.keys import cooldown_key
    from cortex_workers.runtime import get_runtime

    get_runtime().redis.delete(cooldown_key("openai"))  # leave openai usable for other tests


def test_turns_beyond_a_shared_rate_limit_wait_without_burning_attempts(
    client: Api, fakes: Fakes
) -> None:
    # gpt-limited-test allows 2 requests per (test-sized) 2-second window across all workers
    contents = [f"limited {i} {uuid.uuid4()}" for i in range(5)]
    sids = [
        client.create_session(provider="openai", model="gpt-limited-test")["id"] for _ in contents
    ]
    tids = [client.submit(sid, c) for sid, c in zip(sids, contents, strict=True)]
    turns = [client.wait_turn(t, timeout=60) for t in tids]
    assert all(t["status"] == "done" for t in turns)
    assert [t["answer"] for t in turns] == contents  # the fake echoes
    assert all(t["steps"][0]["attempt"] == 1 for t in turns)
    assert sum(len(fakes.openai.requests_for(c)) for c in contents) == 5


def test_a_model_without_native_tools_calls_them_through_the_prompt(
    client: Api, fakes: Fakes
) -> None:
    content = f"prompt tools {uuid.uuid4()}"
    fakes.openai.enqueue(
        content,
        {
            "text": 'Checking.\n<tool_call>{"name": "calculate", "arguments": '
            '{"expression": "2+3"}}</tool_call>'
        },
        {"text": "It is 5."},
    )
    sid = client.create_session(provider="ollama", model="llama3:70b")["id"]
    tid = client.submit(sid, content)
    events = client.turn_events(tid)
    result = next(e.data for e in events if e.event == "tool_result")
    assert result["name"] == "calculate" and result["content"] == '{"result": 5}'
    turn = client.wait_turn(tid)
    assert turn["status"] == "done" and turn["answer"] == "It is 5."
    assert turn["warnings"] and turn["warnings"][0]["code"] == "prompt_tools"
    assert "<tool_call>" not in text_of(events)
    first, second = fakes.openai.requests_for(content)
    assert "tools" not in first.body
    system = [m for m in first.body["messages"] if m["role"] == "system"]
    assert any("<tool_call>" in m["content"] and "calculate" in m["content"] for m in system)
    assert "<tool_result" in str(second.body["messages"])


def test_providers_lists_every_configured_provider_with_its_availability(client: Api) -> None:
    providers = {p["name"]: p for p in client.http.get("/v1/providers").json()}
    assert set(providers) >= {"scripted", "openai", "azure_openai", "anthropic", "ollama"}
    assert all(p["available"] for p in providers.values())
    assert providers["scripted"]["default"] is True
    assert providers["openai"]["rate_limits"] == [
        {"scope": "openai:gpt-limited-test", "rpm": 2, "tpm": None}
    ]
    assert "sk-test" not in str(providers)  # no secrets


def test_a_provider_error_echoing_the_key_is_redacted_before_it_is_stored_or_streamed(
    client: Api, fakes: Fakes
) -> None:
    content = f"leaky {uuid.uuid4()}"
    fakes.openai.enqueue(
        content,
        {
            "status": 401,
            "error": {
                "message": "Incorrect API key provided: sk-test-openai.",
                "type": "invalid_request_error",
            },
        },
    )
    sid = client.create_session(provider="openai", model="gpt-4o-mini")["id"]
    tid = client.submit(sid, content)
    events = client.turn_events(tid)
    error = next(e.data for e in events if e.event == "error")
    assert "[redacted]" in error["message"] and "sk-test-openai" not in error["message"]
    turn = client.wait_turn(tid)
    assert "sk-test-openai" not in str(turn)
