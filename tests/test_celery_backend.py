"""Every task ignores its result, and the (disabled) result backend is one object per process:
Celery keeps one per thread otherwise, which under the gevent pool means building a new backend
for every task greenlet."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from celery.backends.base import DisabledBackend

from config.celery_app import app


def test_the_result_backend_is_disabled_and_shared_by_every_thread() -> None:
    first = app.backend
    assert isinstance(first, DisabledBackend)
    with ThreadPoolExecutor(4) as pool:
        assert all(b is first for b in pool.map(lambda _: app.backend, range(8)))
    app.loader.import_default_modules()  # the task modules, as a worker imports them
    ours = [task for name, task in app.tasks.items() if name.startswith("cortex.")]
    assert ours and all(task.ignore_result for task in ours)
