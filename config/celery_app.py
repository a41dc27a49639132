"""The Celery app. `celery -A config.celery_app:app worker -Q llm` (or `cortex-workers worker`)."""

from __future__ import annotations

import logging
import signal
from types import FrameType

from celery import Celery
from celery.concurrency.prefork import TaskPool as PreforkPool
from celery.signals import (
    after_setup_logger,
    after_setup_task_logger,
    celeryd_init,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
    worker_shutting_down,
)
from celery.worker.consumer import Consumer

from beat.schedule import beat_schedule
from cortex_workers import worker_hooks
from cortex_workers.runtime import get_runtime, reset_runtime
from cortex_workers.settings import get_settings

from .celeryconfig import TASK_MODULES, celery_settings


def create_app() -> Celery:
    settings = get_settings()
    celery = Celery("cortex_workers", include=list(TASK_MODULES))
    celery.conf.update(celery_settings(settings))
    celery.conf.beat_schedule = beat_schedule(settings)
    celery.set_default()
    return celery


@worker_init.connect
def _observe_worker(**_: object) -> None:
    worker_hooks.on_worker_start()


@worker_process_init.connect
def _fresh_resources(**_: object) -> None:
    reset_runtime()
    worker_hooks.on_pool_child_start()
    worker_hooks.warm_before_work()


@worker_process_shutdown.connect
def _pool_child_exits(pid: int, **_: object) -> None:
    worker_hooks.on_pool_child_exit(pid)


@worker_shutting_down.connect
def _drain(how: str = "", **_: object) -> None:
    """A warm shutdown (SIGTERM): running steps get `CORTEX_DRAIN_S` to finish, then their
    leases are handed back (docs/operations.md)."""
    if how == "Warm":
        from cortex_workers.tasks.drain import start_drain

        start_drain()


@worker_shutdown.connect
def _worker_stops(sender: object = None, **_: object) -> None:
    worker_hooks.on_worker_stop()
    exitcode = getattr(sender, "exitcode", 0)
    worker_hooks.exit_at_once(exitcode if isinstance(exitcode, int) else 0)


@celeryd_init.connect
def _early_log_format(**_: object) -> None:
    """Before the worker's first warnings, which come ahead of its logging setup."""
    if worker_hooks.json_logs_requested():
        worker_hooks.use_json_early()


@after_setup_logger.connect
def _root_log_format(logger: logging.Logger, loglevel: int, **_: object) -> None:
    """`CORTEX_LOG_FORMAT=json`: one JSON object per line instead of Celery's text lines; no
    line per maintenance tick."""
    worker_hooks.quiet_maintenance_logs()
    if worker_hooks.json_logs_requested():
        worker_hooks.use_json_root_logs(logger, loglevel)


@after_setup_task_logger.connect
def _task_log_format(logger: logging.Logger, **_: object) -> None:
    if worker_hooks.json_logs_requested():
        worker_hooks.send_task_logs_to_root(logger)


@worker_ready.connect
def _warm_before_work(sender: Consumer, **_: object) -> None:
    """A threads or gevent worker runs its tasks in this process: build what they need before
    the consumer loop starts (Celery logs "ready" after this). Prefork children warm themselves
    in `worker_process_init`."""
    queues = set(sender.app.amqp.queues.consume_from)
    if not isinstance(sender.pool, PreforkPool) and worker_hooks.calls_models(queues):
        worker_hooks.warm_before_work()


@worker_ready.connect
def _reload_tools_on_sighup(**_: object) -> None:
    """SIGHUP reloads tool modules and plugin manifests in place. (Celery's own SIGHUP handler
    re-executes the worker, which fails when it was started as `python -m celery`.)"""

    def reload(signum: int, frame: FrameType | None) -> None:
        get_runtime().reload_tools()
        logging.getLogger(__name__).info("tools reloaded on SIGHUP")

    signal.signal(signal.SIGHUP, reload)


@worker_ready.connect
def _ready_to_drain(**_: object) -> None:
    from cortex_workers.tasks.drain import watch_for_drain

    watch_for_drain()


app = create_app()
