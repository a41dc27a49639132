"""Secrets never reach a log: provider keys, a plugin's bridge token, tenants' API keys.

A short real flow runs with the secrets configured for every process: turns on OpenAI, Azure
OpenAI and Anthropic (through their wire-level fakes), turns those providers refuse with 401, a
plugin tool calling its bridge with its token, requests with a tenant's key and with an unknown
key. Then every log line of the in-process API (root logger at DEBUG) and every worker's log
(the whole session so far) is searched for each secret.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from support import Api, Fakes, Workers

SECRET_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_KEY", "TEST_BRIDGE_TOKEN")
ATTEMPTS = 3
PLUGIN_CALL = {"tool_calls": [{"name": "ticket_search", "arguments": {"query": "disk full"}}]}


@dataclass(frozen=True)
class ProviderTurn:
    """A turn on a provider's fake, and the secret that provider is configured with."""

    turn_id: str
    fake: Any
    content: str
    secret_env: str


def _provider_turn(
    client: Api, fake: Any, provider: str, model: str, reply: dict[str, Any], secret_env: str
) -> ProviderTurn:
    content = f"secrets on {provider} {uuid.uuid4()}"
    # the same reply for a re-delivered attempt too (a step may run twice; see DESIGN.md)
    fake.enqueue(content, *[reply] * ATTEMPTS)
    sid = client.create_session(provider=provider, model=model)["id"]
    return ProviderTurn(client.submit(sid, content), fake, content, secret_env)


def test_no_secret_or_api_key_appears_in_any_log(
    api: Api,
    client: Api,
    tenant_key: str,
    fakes: Fakes,
    workers: Workers,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    secrets = {name: fakes.env[name] for name in SECRET_ENV}
    assert all(secrets.values()), secrets
    unknown_key = f"cwk_{uuid.uuid4().hex[:8]}_{uuid.uuid4().hex}"
    secrets |= {"tenant API key": tenant_key, "unknown API key": unknown_key}

    openai_401 = {
        "status": 401,
        "error": {"message": "Incorrect API key provided: sk-test-****enai.", "type": "auth"},
    }
    anthropic_401 = {
        "status": 401,
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    }
    ok = {"text": "fine, thanks"}
    openai, azure, anthropic = (
        (fakes.openai, "openai", "gpt-4o", "OPENAI_API_KEY"),
        (fakes.openai, "azure_openai", "test-deployment", "AZURE_OPENAI_KEY"),
        (fakes.anthropic, "anthropic", "claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    )
    succeeding = [
        _provider_turn(client, fake, provider, model, ok, env)
        for fake, provider, model, env in (openai, azure, anthropic)
    ]
    failing = [
        _provider_turn(client, *openai[:3], openai_401, openai[3]),
        _provider_turn(client, *anthropic[:3], anthropic_401, anthropic[3]),
    ]
    plugin_sid = client.scripted_session(PLUGIN_CALL, {"text": "found it"}, name="incident-7")
    plugin_turn = client.submit(plugin_sid, "search the tickets")

    for t in succeeding:
        turn = client.wait_turn(t.turn_id)
        assert turn["status"] == "done" and turn["answer"] == "fine, thanks", turn
    for t in failing:
        turn = client.wait_turn(t.turn_id)
        assert turn["status"] == "failed" and "401" in str(turn["error"]), turn
    events = client.turn_events(plugin_turn)
    result = next(e.data for e in events if e.event == "tool_result")
    assert not result["is_error"], result
    # the secrets were really in use: each provider got its key, the bridge its token
    for t in succeeding + failing:
        sent = [r.headers for r in t.fake.requests_for(t.content)]
        assert sent and all(secrets[t.secret_env] in " ".join(h.values()) for h in sent), sent
    assert any(r["auth"] == f"Bearer {secrets['TEST_BRIDGE_TOKEN']}" for r in fakes.bridge.requests)
    refused = httpx.get(
        f"{api.base_url}/v1/providers", headers={"Authorization": f"Bearer {unknown_key}"}
    )
    assert refused.status_code == 401, refused.text

    captured = "\n".join(
        [caplog.text] + [r.getMessage() + "\n" + (r.exc_text or "") for r in caplog.records]
    )
    assert captured.strip(), "the in-process API logged nothing at all: the capture is broken"
    logs = {"api (in-process)": captured} | {
        f"worker {name}": workers.log(name) for name in workers.procs
    }
    assert logs["worker llm"].strip() and logs["worker tools"].strip()
    leaks = [
        f"{secret_name} in {where}"
        for where, text in logs.items()
        for secret_name, value in secrets.items()
        if value in text
    ]
    assert not leaks, leaks
