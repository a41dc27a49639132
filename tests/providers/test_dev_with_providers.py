"""`cortex-workers dev` configured only through the environment answers turns with tool calls
through an OpenAI-compatible server (OPENAI_API_BASE), Azure OpenAI and Anthropic."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
from fakes.anthropic_server import FakeAnthropic
from fakes.openai_server import FakeOpenAI
from support import (
    api_ready,
    dev_env,
    free_port,
    start_dev,
    stop_dev,
    stream_until_done,
    wait_until,
)

TOOLS = {
    "text": "Checking.",
    "tool_calls": [
        {"name": "calculate", "arguments": {"expression": "7*6"}},
        {"name": "current_time", "arguments": {}},
    ],
}


def test_dev_answers_tool_turns_through_each_configured_provider(tmp_path: Path) -> None:
    openai, anthropic = FakeOpenAI(), FakeAnthropic()
    openai_url, anthropic_url = openai.start(), anthropic.start()
    env = dev_env(
        LLM_PROVIDER="openai",
        OPENAI_API_BASE=f"{openai_url}/v1",
        OPENAI_API_KEY="sk-dev",
        OPENAI_MODEL="my-local-model",
        AZURE_OPENAI_KEY="az-dev",
        AZURE_OPENAI_BASE_URL=openai_url,
        AZURE_OPENAI_DEPLOYMENT="dev-deployment",
        AZURE_OPENAI_API_VERSION="2024-10-21",
        ANTHROPIC_API_KEY="sk-ant-dev",
        ANTHROPIC_BASE_URL=anthropic_url,
        ANTHROPIC_MODEL="claude-sonnet-4-5",
    )
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_dev(tmp_path / "data", port, tmp_path / "dev.log", env)
    try:
        wait_until(lambda: api_ready(base), timeout=120, interval=0.5, what="dev stack ready")
        key = (tmp_path / "data" / "api-key").read_text().strip()
        http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        for provider, fake in (
            ("openai", openai),
            ("azure_openai", openai),
            ("anthropic", anthropic),
        ):
            content = f"7*6 and the time, via {provider}? {uuid.uuid4()}"
            fake.enqueue(content, TOOLS, {"text": f"42, said {provider}."})
            body = {} if provider == "openai" else {"provider": provider}  # openai: the default
            sid = http.post("/v1/sessions", json=body).json()["id"]
            tid = http.post(f"/v1/sessions/{sid}/turns", json={"content": content}).json()["id"]
            events = stream_until_done(http, f"/v1/turns/{tid}/events")
            kinds = [e.event for e in events]
            assert kinds.count("tool_result") == 2 and events[-1].data["status"] == "done", kinds
            turn = http.get(f"/v1/turns/{tid}").json()
            assert turn["answer"] == f"42, said {provider}."
            assert {s["provider"] for s in turn["steps"] if s["kind"] == "model"} == {provider}
        sent = [r.body["model"] for r in openai.requests if r.path == "/v1/chat/completions"]
        assert set(sent) == {"my-local-model"}
        providers = {p["name"]: p for p in http.get("/v1/providers").json()}
        assert providers["openai"]["default"] and providers["openai"]["available"]
    finally:
        stop_dev(proc)
        openai.stop()
        anthropic.stop()
