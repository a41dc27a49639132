"""The Celery app. `celery -A config.celery_app:app worker -Q llm` (or `cortex-workers worker`)."""

from __future__ import annotations

import logging
import signal
from types import FrameType

from celery import Celery
from celery.signals import worker_process_init, worker_ready

from beat.schedule import beat_schedule
from cortex_workers.runtime import get_runtime, reset_runtime
from cortex_workers.settings import get_settings

from .celeryconfig import celery_settings


def create_app() -> Celery:
    settings = get_settings()
    celery = Celery(
        "cortex_workers",
        include=[
            "cortex_workers.tasks.llm",
            "cortex_workers.tasks.tools",
            "cortex_workers.tasks.summarize",
            "cortex_workers.tasks.maintenance",
        ],
    )
    celery.conf.update(celery_settings(settings))
    celery.conf.beat_schedule = beat_schedule(settings)
    celery.set_default()
    return celery


@worker_process_init.connect
def _fresh_resources(**_: object) -> None:
    reset_runtime()


@worker_ready.connect
def _reload_tools_on_sighup(**_: object) -> None:
    """SIGHUP reloads tool modules and plugin manifests in place. (Celery's own SIGHUP handler
    re-executes the worker, which fails when it was started as `python -m celery`.)"""

    def reload(signum: int, frame: FrameType | None) -> None:
        get_runtime().reload_tools()
        logging.getLogger(__name__).info("tools reloaded on SIGHUP")

    signal.signal(signal.SIGHUP, reload)


app = create_app()
