"""Real Postgres, real Redis, real Celery workers, a real API on a loopback port.

With `CORTEX_TEST_DATABASE_URL` / `CORTEX_TEST_REDIS_URL` (and optionally
`CORTEX_TEST_BROKER_URL`) set, those servers are used (a fresh database is created for the run);
otherwise embedded servers are started in a temporary directory.
"""

from __future__ import annotations

import json
import os
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path

import agents.cards_dir  # noqa: F401  (the run's agent cards, before any worker starts)
import psycopg
import pytest
from fakes.anthropic_server import FakeAnthropic
from fakes.openai_server import FakeOpenAI
from sqlalchemy.engine import URL, make_url
from support import (
    Api,
    Bridge,
    Fakes,
    Stack,
    Workers,
    free_port,
    start_api,
    write_plugin_manifests,
)

from cortex_workers.store.db import normalize_url

# The scripted provider is off by default outside `dev` and tests: on for every test process
# (and the workers and APIs they start, which inherit the environment).
os.environ.setdefault("CORTEX_LLM_SCRIPTED", "true")

TEST_SETTINGS = {
    "CORTEX_LLM_SCRIPTED": "true",  # off by default outside `dev` and tests
    "CORTEX_SCHEDULE_MIN_EVERY_S": "1",
    "CORTEX_LEASE_S": "3",
    "CORTEX_REPUBLISH_AFTER_S": "2",
    "CORTEX_RECONCILE_EVERY_S": "1",
    "CORTEX_RETRY_BASE_S": "0.2",
    "CORTEX_RETRY_MAX_S": "0.5",
    "CORTEX_HISTORY_WINDOW": "8",
    "CORTEX_TOOL_TIMEOUT_S": "2",
    "CORTEX_MAX_DEPTH": "4",
    "CORTEX_REQUEST_MAX_BYTES": "65536",
    "CORTEX_SSE_PING_S": "2",
    "CORTEX_TOOL_PROGRESS_AFTER_S": "1",
    "CORTEX_TOOL_MODULES": '["sample_tools"]',
    "CORTEX_TOKEN_SECRET": "test-session-token-secret",
    "CORTEX_WEBHOOK_ALLOWED_PRIVATE_HOSTS": "127.0.0.1",
    "CORTEX_WEBHOOK_BACKOFF_BASE_S": "0.5",
    "CORTEX_WEBHOOK_BACKOFF_MAX_S": "2",
    "CORTEX_WEBHOOK_TIMEOUT_S": "2",
    "CORTEX_WEBHOOK_DISPATCH_EVERY_S": "0.5",
    "CORTEX_LIVENESS_S": "2",
    "CORTEX_TAKEOVER_EVERY_S": "0.5",
    "CORTEX_DRAIN_S": "2",
    # the loop guards and recovery policies exercised by tests/timeline: a short final answer
    # is retried once, then the turn fails visibly; a call slower than 3 x its model's p95 (and
    # than 1 s) goes to the next route; a call costing over 2 x its reservation rolls back
    "CORTEX_RECOVERY": json.dumps(
        {
            "max_parallel_tools": 2,
            "actions": {
                "short_output": "retry",
                "latency_spike": "fallback",
                "cost_overrun": "rollback",
            },
            "thresholds": {"latency_min_ms": 1000},
        }
    ),
}


def _libpq(url: URL) -> str:
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


def _fresh_database(server_url: str) -> tuple[str, str]:
    """Create an empty database on the given server; returns (url, name)."""
    name = f"cortex_test_{secrets.token_hex(4)}"
    url = make_url(normalize_url(server_url))
    with psycopg.connect(_libpq(url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return url.set(database=name).render_as_string(hide_password=False), name


def _drop_database(server_url: str, name: str) -> None:
    url = make_url(normalize_url(server_url))
    with psycopg.connect(_libpq(url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Database, Redis and broker URLs for this run, with the schema migrated."""
    db_server = os.environ.get("CORTEX_TEST_DATABASE_URL")
    redis_url = os.environ.get("CORTEX_TEST_REDIS_URL")
    embedded = None
    if not (db_server and redis_url):
        from cortex_workers.devstack import EmbeddedStack

        embedded = EmbeddedStack(tmp_path_factory.mktemp("embedded"), persist_redis=False).start()
        db_server = db_server or embedded.database_url
        redis_url = redis_url or embedded.redis_url
    database_url, db_name = _fresh_database(db_server)
    broker_url = os.environ.get("CORTEX_TEST_BROKER_URL") or redis_url
    env = {
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "CELERY_BROKER_URL": broker_url,
        **TEST_SETTINGS,
    }
    os.environ.update(env)
    os.environ.pop("CORTEX_CONFIG", None)
    from cortex_workers.admin import migrate
    from cortex_workers.runtime import get_runtime, reset_runtime
    from cortex_workers.settings import reset_settings

    reset_settings()
    reset_runtime()
    get_runtime().redis.flushdb()
    migrate()
    yield Stack(
        database_url=database_url,
        redis_url=redis_url,
        broker_url=broker_url,
        env=env,
        data_dir=Path(str(tmp_path_factory.mktemp("data"))),
    )
    reset_runtime()
    try:
        _drop_database(db_server, db_name)
    finally:
        if embedded is not None:
            embedded.stop()


FAKE_MODELS = {
    # a model whose outages fall back to a backup model on another provider
    "gpt-fallback-test": {"provider": "openai", "backup": "claude-backup-test"},
    "claude-backup-test": {"provider": "anthropic"},
    "gpt-limited-test": {"provider": "openai"},
    # a model whose slow calls fall back to a backup (tests/timeline)
    "gpt-spike-test": {"provider": "openai", "backup": "claude-spike-test"},
    "claude-spike-test": {"provider": "anthropic"},
    # a call's 4096 output tokens at most cost exactly $0.30 (73.2421875 * 4096 = 300000 µ$)
    "gpt-budget-test": {"provider": "openai", "input_per_mtok": 0, "output_per_mtok": 73.2421875},
}
FAKE_RATE_LIMITS = {"openai:gpt-limited-test": {"rpm": 2}}


@pytest.fixture(scope="session")
def fakes(stack: Stack) -> Iterator[Fakes]:
    """Fake OpenAI (also serving the Azure and Ollama paths) and Anthropic servers, which the
    workers and the API are configured to call."""
    openai, anthropic, bridge = FakeOpenAI(), FakeAnthropic(), Bridge()
    openai_url, anthropic_url = openai.start(), anthropic.start()
    plugins_dir = stack.data_dir / "plugins"
    write_plugin_manifests(plugins_dir, port=bridge.port)
    env = {
        "OPENAI_API_KEY": "sk-test-openai",
        "OPENAI_API_BASE": f"{openai_url}/v1",
        "OLLAMA_BASE_URL": f"{openai_url}/v1",
        "AZURE_OPENAI_KEY": "test-azure-key",
        "AZURE_OPENAI_BASE_URL": openai_url,
        "AZURE_OPENAI_DEPLOYMENT": "test-deployment",
        "AZURE_OPENAI_API_VERSION": "2024-10-21",
        "ANTHROPIC_API_KEY": "sk-test-anthropic",
        "ANTHROPIC_BASE_URL": anthropic_url,
        "CORTEX_LLM_MODELS": json.dumps(FAKE_MODELS),
        "CORTEX_LLM_RATE_LIMITS": json.dumps(FAKE_RATE_LIMITS),
        "CORTEX_LLM_RATE_WINDOW_S": "2",
        "CORTEX_LLM_RATE_WAIT_MAX_S": "0.2",
        "CORTEX_LLM_COOLDOWN_AFTER_FAILURES": "2",
        "CORTEX_LLM_COOLDOWN_S": "20",
        "CORTEX_PLUGINS_DIR": str(plugins_dir),
        "TEST_BRIDGE_TOKEN": "bridge-secret-token",
    }
    os.environ.update(env)
    from cortex_workers.runtime import reset_runtime
    from cortex_workers.settings import reset_settings

    reset_settings()
    reset_runtime()
    yield Fakes(openai, anthropic, env, bridge)
    openai.stop()
    anthropic.stop()
    bridge.stop()


@pytest.fixture(scope="session")
def workers(
    stack: Stack, fakes: Fakes, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Workers]:
    """One worker process per queue group, and beat, as in production."""
    # the workers' metric files, read by tests/turns/test_step_metrics.py
    metrics_dir = str(tmp_path_factory.mktemp("metrics"))
    group = Workers(
        env={**os.environ, **stack.env, **fakes.env, "PROMETHEUS_MULTIPROC_DIR": metrics_dir},
        log_dir=Path(str(tmp_path_factory.mktemp("logs"))),
    )
    group.purge_queues()
    group.start_all()
    yield group
    group.stop_all()


@pytest.fixture(scope="session")
def api(stack: Stack, workers: Workers) -> Iterator[Api]:
    """The API in this process, on a loopback port."""
    with start_api(port=free_port()) as base_url:
        yield Api(base_url)


@pytest.fixture
def tenant_key(stack: Stack) -> str:
    """A new tenant with one API key."""
    from cortex_workers.admin import create_key

    return create_key(f"tenant-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def client(api: Api, tenant_key: str) -> Iterator[Api]:
    """An API client authenticated as a fresh tenant."""
    with api.as_tenant(tenant_key) as c:
        yield c


@pytest.fixture
def other_client(api: Api) -> Iterator[Api]:
    """An API client of a second, unrelated tenant."""
    from cortex_workers.admin import create_key

    with api.as_tenant(create_key(f"other-{uuid.uuid4().hex[:8]}")) as c:
        yield c
