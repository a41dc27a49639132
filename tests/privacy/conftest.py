"""A second worker group and API, on their own broker (the stack's Postgres and Redis), set up
for privacy, modes and routing: PII redaction on, an operator pattern that can time out, a
remote OpenAI fake and a local (Ollama) one. Sessions choose their mode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.openai_server import FakeOpenAI
from privacy_support import REMOTE_KEY, Guarded
from support import Api, Stack, Workers, api_ready, free_port, wait_until

PRIVACY = {
    "redact_pii": True,
    "patterns": {"ticket": r"TCK-\d{6}", "slow": r"(a|aa)+$"},
    "timeout": 0.3,
}
PROVIDERS = {"openai": {"model": "gpt-4o", "fast_model": "gpt-4o-mini", "max_tokens": 256}}


def _broker(redis_url: str) -> str:
    base, _, _ = redis_url.rpartition("/")
    return f"{base}/9"


def _start_api(env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "config.asgi:app", "--host", "127.0.0.1"]
        + ["--port", str(port), "--log-level", "warning"],
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    wait_until(lambda: api_ready(base), timeout=60, interval=0.3, what="guarded api ready")
    return proc, base


@pytest.fixture(scope="session")
def guarded(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guarded]:
    remote, local = FakeOpenAI(), FakeOpenAI()
    remote_url, local_url = remote.start(), local.start()
    env = {
        **os.environ,
        **stack.env,
        "CELERY_BROKER_URL": _broker(stack.redis_url),
        "OPENAI_API_KEY": REMOTE_KEY,
        "OPENAI_API_BASE": f"{remote_url}/v1",
        "OLLAMA_BASE_URL": f"{local_url}/v1",
        "CORTEX_LLM_PROVIDERS": json.dumps(PROVIDERS),
        "CORTEX_LLM_PRIVACY": json.dumps(PRIVACY),
        "CORTEX_LLM_FALLBACK_PROVIDERS": "[]",
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent), "."]),
    }
    logs = Path(str(tmp_path_factory.mktemp("guarded-logs")))
    group = Workers(env=env, log_dir=logs)
    group.purge_queues()
    group.start("llm")
    group.start("summarize")
    api, base = _start_api(env, logs / "api.log")
    try:
        yield Guarded(Api(base), remote, local, logs)
    finally:
        os.killpg(api.pid, signal.SIGTERM)
        api.wait(15)
        group.stop_all()
        remote.stop()
        local.stop()


@pytest.fixture
def gclient(guarded: Guarded) -> Iterator[Api]:
    """A fresh tenant on the guarded API."""
    from cortex_workers.admin import create_key

    with guarded.api.as_tenant(create_key(f"guarded-{uuid.uuid4().hex[:8]}")) as c:
        yield c
