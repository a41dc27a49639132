"""A second worker group and API on their own broker (tests/side_stack.py), set up for privacy,
modes and routing: PII redaction on, an operator pattern that can time out, a remote OpenAI fake
and a local (Ollama) one. Sessions choose their mode."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.openai_server import FakeOpenAI
from privacy_support import REMOTE_KEY, Guarded
from side_stack import side_api, side_env
from support import Api, Stack, Workers

PRIVACY = {
    "redact_pii": True,
    "patterns": {"ticket": r"TCK-\d{6}", "slow": r"(a|aa)+$"},
    "timeout": 0.3,
}
PROVIDERS = {"openai": {"model": "gpt-4o", "fast_model": "gpt-4o-mini", "max_tokens": 256}}


@pytest.fixture(scope="session")
def guarded(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guarded]:
    remote, local = FakeOpenAI(), FakeOpenAI()
    remote_url, local_url = remote.start(), local.start()
    env = side_env(
        stack,
        broker_db=9,
        OPENAI_API_KEY=REMOTE_KEY,
        OPENAI_API_BASE=f"{remote_url}/v1",
        OLLAMA_BASE_URL=f"{local_url}/v1",
        CORTEX_LLM_PROVIDERS=json.dumps(PROVIDERS),
        CORTEX_LLM_PRIVACY=json.dumps(PRIVACY),
        CORTEX_LLM_FALLBACK_PROVIDERS="[]",
    )
    logs = Path(str(tmp_path_factory.mktemp("guarded-logs")))
    group = Workers(env=env, log_dir=logs)
    group.purge_queues()
    try:
        group.start_together("llm", "summarize", "batch")
        with side_api(env, logs / "api.log") as base:
            yield Guarded(Api(base), remote, local, logs)
    finally:
        group.stop_all()
        remote.stop()
        local.stop()


@pytest.fixture
def gclient(guarded: Guarded) -> Iterator[Api]:
    """A fresh tenant on the guarded API."""
    from cortex_workers.admin import create_key

    with guarded.api.as_tenant(create_key(f"guarded-{uuid.uuid4().hex[:8]}")) as c:
        yield c
