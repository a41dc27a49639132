"""Every task of the product, as Celery registers it: its name says its queue, and it is
delivered at least once (acknowledged after it ran, handed back when its worker is lost) with
its result ignored."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from celery import Celery
from celery.backends.base import DisabledBackend
from celery_support import TASKS

from cortex_workers import queues
from cortex_workers.queues import Queue

pytestmark = pytest.mark.servers


def test_the_app_registers_exactly_these_tasks_each_named_after_its_queue(app: Celery) -> None:
    assert queues.RUN_MODEL_STEP == "cortex.llm.run_model_step"
    assert {name for name in app.tasks if name.startswith("cortex.")} == set(TASKS)
    for name, queue in TASKS.items():
        assert name.startswith(f"cortex.{queue.value}."), name
    assert set(TASKS.values()) == set(Queue), "a queue without a task"


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_task_acks_late_and_is_handed_back_when_its_worker_is_lost(
    app: Celery, name: str
) -> None:
    task = app.tasks[name]
    assert task.acks_late is True, f"{name} is acknowledged before it runs: a crash loses it"
    assert task.reject_on_worker_lost is True, f"{name} is acknowledged when its worker dies"
    assert task.ignore_result is True, f"{name} stores a result: state is in Postgres"


def test_the_result_backend_is_disabled_and_shared_by_every_thread(app: Celery) -> None:
    """Celery keeps one backend per thread otherwise, which under the gevent pool means a new
    backend for every task greenlet."""
    first = app.backend
    assert isinstance(first, DisabledBackend)
    with ThreadPoolExecutor(4) as pool:
        assert all(b is first for b in pool.map(lambda _: app.backend, range(8)))
