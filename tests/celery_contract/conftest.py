"""Celery's own test fixtures, from the pytest-celery plugin, on the embedded broker.

`celery_config` is the product's Celery configuration (`config/celeryconfig.py`) with the
stack's Redis as the broker, on a database of its own so that the shared test workers never take
these messages; `celery_app` (the plugin's) is a Celery app configured with it, and
`celery_includes` are the product's task modules. `celery_worker` is Celery's in-process worker
(`celery.contrib.pytest`): the plugin's own fixture of that name starts workers in containers.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from celery import Celery
from celery.contrib.pytest import celery_worker  # noqa: F401  (Celery's in-process worker)
from celery_support import Broker, broker_of
from support import Stack

from config.celeryconfig import TASK_MODULES, celery_settings

BROKER_DB = 11
"""The Redis database of these tests' broker (the shared test workers use the stack's)."""


@pytest.fixture(scope="session")
def celery_config(stack: Stack) -> dict[str, Any]:
    from cortex_workers.settings import get_settings

    base, _, _ = stack.redis_url.rpartition("/")
    url = f"{base}/{BROKER_DB}"
    config = celery_settings(get_settings().model_copy(update={"broker_url": url}))
    # Celery prefers the environment's CELERY_BROKER_URL (the shared workers' broker, which the
    # stack sets) to `broker_url`, but not to these
    return {**config, "broker_read_url": url, "broker_write_url": url}


@pytest.fixture(scope="session")
def celery_includes() -> Sequence[str]:
    """The product's task modules, imported before any test's app exists: their tasks then
    register with every app (Celery's test apps forget what registered during a test)."""
    for module in TASK_MODULES:
        importlib.import_module(module)
    return TASK_MODULES


@pytest.fixture
def app(celery_includes: Sequence[str], celery_app: Celery) -> Celery:
    """`celery_app` with the product's tasks, as a worker has them."""
    celery_app.finalize()
    return celery_app


@pytest.fixture
def broker(app: Celery) -> Iterator[Broker]:
    """The app's broker, every queue empty at the start."""
    with broker_of(app) as b:
        assert b.conn.virtual_host == str(BROKER_DB), b.conn.as_uri()
        b.take_all()
        yield b
