"""The baseline: a bare Celery app whose unit of work is a chain of three no-op tasks.

    celery -A scripts.bench.chain_app:app worker -Q bench_chain --pool threads -c 32

Same broker and the same delivery settings as the product's app (`config.celeryconfig`: late
acks, prefetch 1, JSON, results ignored, task events off), its own queue. The last task of a
chain counts it in Redis (`INCR`) on one client per process, as the product's workers share
theirs; that is the only I/O a chain does.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

import redis
from celery import Celery, chain
from kombu.entity import Exchange, Queue

from cortex_workers.settings import get_settings

QUEUE = "bench_chain"
DONE_KEY = "bench:chain:done"


def create_app() -> Celery:
    # the composition root, by name (it is not part of the typed package)
    celery_settings = importlib.import_module("config.celeryconfig").celery_settings
    conf: dict[str, Any] = celery_settings(get_settings())
    queue = Queue(QUEUE, Exchange(QUEUE, type="direct"), routing_key=QUEUE)  # type: ignore[no-untyped-call]
    conf.update(
        task_queues=[queue],
        task_default_queue=QUEUE,
        task_routes={"bench.*": {"queue": QUEUE}},
        task_annotations={},
        beat_schedule={},
    )
    celery = Celery("cortex_bench_chain")
    celery.conf.update(conf)
    return celery


app = create_app()


@functools.cache
def _redis() -> redis.Redis:
    """The process's client (thread-safe: each command takes a connection from its pool). Not
    one per thread: under gevent a thread-local is per task greenlet, and the chain would then
    pay for a new client and connection on every `done`."""
    return redis.Redis.from_url(get_settings().redis_url)


@app.task(name="bench.noop", ignore_result=True)  # type: ignore[untyped-decorator]
def noop() -> None:
    return None


@app.task(name="bench.done", ignore_result=True)  # type: ignore[untyped-decorator]
def done() -> None:
    _redis().incr(DONE_KEY)


def three_step_chain() -> Any:
    """The unit of work: noop → noop → done (each task its own broker round trip)."""
    return chain(noop.si(), noop.si(), done.si())
