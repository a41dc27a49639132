"""Queue and task names are spelled once: beat schedules the names of `cortex_workers.queues`, and
each step kind has one task on its own queue. (What Celery registers and routes, and how it
delivers, is tests/celery_contract.)"""

from __future__ import annotations

import pytest

from beat.schedule import beat_schedule
from config.celery_app import app
from cortex_workers import queues
from cortex_workers.queues import Queue, step_route
from cortex_workers.settings import get_settings
from cortex_workers.vocabulary import StepKind


@pytest.mark.parametrize(
    ("kind", "task", "queue"),
    [
        (StepKind.MODEL, queues.RUN_MODEL_STEP, Queue.LLM),
        (StepKind.TOOL, queues.RUN_TOOL_STEP, Queue.TOOLS),
        (StepKind.SUMMARIZE, queues.RUN_SUMMARIZE_STEP, Queue.SUMMARIZE),
    ],
)
def test_each_step_kind_runs_one_task_on_its_queue(kind: StepKind, task: str, queue: Queue) -> None:
    route = step_route(kind)
    assert (route.task, route.queue) == (task, queue)
    assert step_route(StepKind(kind.value)) == route


def test_beat_schedules_the_reconciler_on_the_maintenance_queue() -> None:
    app.loader.import_default_modules()
    entry = beat_schedule(get_settings())["reconcile"]
    assert entry["task"] == queues.RECONCILE and queues.RECONCILE in app.tasks
    assert entry["options"]["queue"] == Queue.MAINTENANCE.value


def test_beat_schedules_the_takeover_pass_always_and_retention_only_when_configured() -> None:
    settings = get_settings()
    plain = beat_schedule(settings)
    assert plain["take_over"]["task"] == queues.TAKE_OVER
    assert plain["take_over"]["schedule"] == settings.takeover_every_s
    assert "retention" not in plain
    kept = beat_schedule(settings.model_copy(update={"retention_days": 30.0}))
    assert kept["retention"]["task"] == queues.APPLY_RETENTION
    assert kept["retention"]["options"]["queue"] == Queue.MAINTENANCE.value
