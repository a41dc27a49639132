"""A second worker group and API with their own settings, on their own broker (the stack's
Postgres and Redis), for tests whose settings differ from the shared stack's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support import Stack, api_ready, free_port, wait_until


def side_env(stack: Stack, *, broker_db: int, **settings: str) -> dict[str, str]:
    """The stack's environment with `settings` and a broker of its own (Redis db `broker_db`,
    so that the shared workers never take this group's tasks)."""
    base, _, _ = stack.redis_url.rpartition("/")
    tests_dir = str(Path(__file__).resolve().parent)
    return {
        **os.environ,
        **stack.env,
        "CELERY_BROKER_URL": f"{base}/{broker_db}",
        "PYTHONPATH": os.pathsep.join([tests_dir, "."]),
        **settings,
    }


@contextmanager
def side_api(env: dict[str, str], log: Path) -> Iterator[str]:
    """An API process with `env`; yields its base URL."""
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
    try:
        wait_until(lambda: api_ready(base), timeout=60, interval=0.3, what=f"api on {log.name}")
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(15)
