"""A task whose worker process is lost mid-task (SIGKILLed, as an OOM kill would) is not lost:
its message was not acknowledged before the task ended, and the worker hands it back to the
broker, which delivers it again. The probe task takes its delivery options from the product's
Celery configuration, as every task of the product does (tests/celery_contract/test_tasks.py)."""

from __future__ import annotations

import json
import os
import signal
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from celery import Celery, Task
from celery.signals import task_failure
from celery.worker import WorkController

from cortex_workers.queues import Queue, task_name

pytestmark = pytest.mark.servers

PROBE = task_name(Queue.LLM, "contract_probe")
WAIT_S = 60
"""How long a probe run waits to be released, and the test for each run: only a broken
contract (a message never delivered again) runs into it."""


@pytest.fixture(scope="module")
def celery_worker_pool() -> str:
    return "prefork"  # a task runs in a child process, which can be killed


@pytest.fixture(scope="module")
def celery_worker_parameters() -> dict[str, Any]:
    # no ping: results are ignored (the product has no result backend)
    return {"queues": [Queue.LLM.value], "perform_ping_check": False, "concurrency": 1}


@dataclass
class Probe:
    """A task that records each run (its process, whether its message was redelivered) in a
    Redis list, then waits to be released."""

    task: Task
    redis: redis.Redis
    runs: str
    release: str

    def next_run(self) -> dict[str, Any]:
        got = self.redis.blpop([self.runs], timeout=WAIT_S)
        if got is None:
            pytest.fail(f"no run of the probe, and no failure, in {WAIT_S}s")
        return dict(json.loads(got[1]))


@pytest.fixture
def probe(celery_app: Celery, celery_config: dict[str, Any]) -> Iterator[Probe]:
    keys = f"celery-contract:{uuid.uuid4().hex}"
    runs, release = f"{keys}:runs", f"{keys}:release"
    broker_url = celery_config["broker_url"]

    @celery_app.task(name=PROBE, bind=True)
    def contract_probe(self: Task) -> None:
        r = redis.Redis.from_url(broker_url, socket_timeout=WAIT_S + 10)
        run = {"pid": os.getpid(), "id": self.request.id}
        run["redelivered"] = bool(self.request.delivery_info.get("redelivered"))
        r.rpush(runs, json.dumps(run))
        r.blpop([release], timeout=WAIT_S)

    def failed(sender: Task, task_id: str, exception: BaseException, **_: Any) -> None:
        """In the worker's main process: the task failed and its message was not handed back."""
        if sender.name == PROBE:
            r = redis.Redis.from_url(broker_url, socket_timeout=WAIT_S + 10)
            r.rpush(runs, json.dumps({"failed": repr(exception), "id": task_id}))

    task_failure.connect(failed, weak=False)
    client = redis.Redis.from_url(broker_url, socket_timeout=WAIT_S + 10)
    try:
        yield Probe(contract_probe, client, runs, release)
    finally:
        task_failure.disconnect(failed)
        client.delete(runs, release)
        client.close()


@pytest.fixture
def worker(probe: Probe, celery_worker: WorkController) -> Iterator[WorkController]:
    """Celery's in-process worker on queue `llm`, started once the probe is registered."""
    yield celery_worker
    probe.redis.rpush(probe.release, "go", "go")  # the run still waiting ends: the worker stops


def test_a_task_whose_worker_process_is_killed_is_delivered_again(
    probe: Probe, worker: WorkController
) -> None:
    sent = probe.task.apply_async()
    first = probe.next_run()
    assert (first.get("id"), first.get("redelivered")) == (sent.id, False), first
    os.kill(first["pid"], signal.SIGKILL)
    second = probe.next_run()
    assert "failed" not in second, f"the message was not handed back to the broker: {second}"
    assert (second["id"], second["redelivered"]) == (sent.id, True)
    assert second["pid"] != first["pid"]
