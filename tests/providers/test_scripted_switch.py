"""The scripted provider is free and sleeps as told: it is off unless the operator turns it
on (`dev` and the tests do), and its delays are capped."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cortex_workers.errors import RetryableError
from cortex_workers.messages import Message, ModelRequest
from cortex_workers.providers.registry import ProviderRegistry
from cortex_workers.providers.scripted import ScriptedProvider, ScriptReply
from cortex_workers.settings import Settings


def test_the_scripted_provider_is_off_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CORTEX_LLM_SCRIPTED", raising=False)
    registry = ProviderRegistry(Settings())
    reason = registry.unavailable("scripted")
    assert reason is not None and "CORTEX_LLM_SCRIPTED" in reason
    assert ProviderRegistry(Settings(llm_scripted=True)).unavailable("scripted") is None


def test_a_reply_s_delays_are_capped() -> None:
    with pytest.raises(ValidationError):
        ScriptReply(first_token_ms=600_000)
    with pytest.raises(ValidationError):
        ScriptReply(token_ms=60_000)


def test_a_call_sleeping_past_the_provider_timeout_fails_as_a_timeout() -> None:
    slept: list[float] = []
    provider = ScriptedProvider(sleep=slept.append, timeout_s=5.0)
    script = ({"text": "a b c d", "first_token_ms": 3000, "token_ms": 1000},)
    request = ModelRequest(model="scripted-1", messages=(Message("user", "hi"),), script=script)
    with pytest.raises(RetryableError) as caught:
        list(provider.stream(request))
    assert caught.value.code == "provider_timeout"
    assert sum(slept) <= 5.0
