"""A stack whose processes reach Postgres and Redis through counting proxies (`wire_counter`):
an API, an `llm` worker and a `tools` worker, each with its own pair of proxies, on a broker of
their own (Redis db 12), with the default settings of the features (no budget limit, no
recovery policy, no loop-guard limit): what a plain deployment runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hot_path_support import PROCESSES, Counted
from side_stack import side_env
from sqlalchemy.engine import make_url
from support import Api, Stack, Workers, api_ready, free_port, wait_until
from wire_counter import PostgresCounter, RedisCounter

BROKER_DB = 12


def _proxied(url: str, port: int, **query: str) -> str:
    parsed = make_url(url)
    return (
        parsed.set(host="127.0.0.1", port=port)
        .difference_update_query(["host", "port"])
        .update_query_dict(query)
        .render_as_string(hide_password=False)
    )


def _postgres_address(url: str) -> tuple[str, int] | str:
    """Where the stack's Postgres listens: a host and port, or a Unix socket."""
    parsed = make_url(url)
    socket_dir = parsed.query.get("host")
    if parsed.host is None and isinstance(socket_dir, str) and socket_dir.startswith("/"):
        port = parsed.port or int(str(parsed.query.get("port", 5432)))
        return f"{socket_dir}/.s.PGSQL.{port}"
    return (parsed.host or "127.0.0.1", parsed.port or 5432)


@pytest.fixture(scope="session")
def counted(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Counted]:
    redis_url = make_url(stack.redis_url)
    pg_upstream = _postgres_address(stack.database_url)
    redis_upstream = (redis_url.host or "127.0.0.1", redis_url.port or 6379)
    postgres = {name: PostgresCounter(pg_upstream) for name in PROCESSES}
    redis = {name: RedisCounter(redis_upstream) for name in PROCESSES}
    base = side_env(stack, broker_db=BROKER_DB)
    base.pop("CORTEX_RECOVERY", None)  # the features' defaults: no recovery policy, no limits
    # What is counted is a step's own round trips. A connection idle past the ping threshold
    # (1 s by default) costs a ping on its next use (tests/store/test_pool_ping.py); on a loaded
    # machine one turn can take that long, and the ping would be counted as the next step's.
    base["CORTEX_DB_PING_AFTER_IDLE_S"] = "30"

    def env_of(name: str) -> dict[str, str]:
        redis_base = _proxied(stack.redis_url, redis[name].port)
        return {
            "PGAPPNAME": name,
            "DATABASE_URL": _proxied(
                stack.database_url, postgres[name].port, sslmode="disable", gssencmode="disable"
            ),
            "REDIS_URL": redis_base,
            "CELERY_BROKER_URL": f"{redis_base.rpartition('/')[0]}/{BROKER_DB}",
        }

    logs = Path(str(tmp_path_factory.mktemp("counted-logs")))
    group = Workers(env=dict(base), log_dir=logs)
    group.env["CELERY_BROKER_URL"] = env_of("llm")["CELERY_BROKER_URL"]
    group.purge_queues()
    group.start_together("llm", "tools", env_of=env_of)
    port = free_port()
    api = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "config.asgi:app", "--host", "127.0.0.1"]
        + ["--port", str(port), "--log-level", "warning"],
        env={**base, **env_of("api")},
        stdout=(logs / "api.log").open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: api_ready(url), timeout=60, interval=0.3, what="counted api")
        yield Counted(Api(url), postgres, redis)
    finally:
        os.killpg(api.pid, signal.SIGTERM)
        api.wait(15)
        group.stop_all()
        for proxy in (*postgres.values(), *redis.values()):
            proxy.close()


@pytest.fixture
def counted_client(counted: Counted, stack: Stack) -> Iterator[Api]:
    """A fresh tenant on the counted stack."""
    from cortex_workers.admin import create_key

    name = f"counted-{os.urandom(4).hex()}"
    with counted.api.as_tenant(create_key(name)) as client:
        client.tenant_name = name  # type: ignore[attr-defined]
        yield client
