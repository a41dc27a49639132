"""The Celery app. `celery -A config.celery_app:app worker -Q llm` (or `cortex-workers worker`)."""

from __future__ import annotations

from celery import Celery
from celery.signals import worker_process_init

from beat.schedule import beat_schedule
from cortex_workers.runtime import reset_runtime
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


app = create_app()
