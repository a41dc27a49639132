"""Every queue and Celery task name, spelled once.

A task is named `cortex.<queue>.<task>`, so routing by name prefix (config/celeryconfig.py) and
the queue a task is sent to (dispatch.py) agree by construction. The task decorators
(`tasks/*.py`), the dispatcher, the Celery config and the beat schedule import their names from
here. Pure values: this module imports nothing of the domain and no framework.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final, assert_never

from .vocabulary import StepKind


class Queue(StrEnum):
    """A Celery queue; each has its own worker group (`cortex-workers worker --queues NAME`)."""

    LLM = "llm"
    TOOLS = "tools"
    SUMMARIZE = "summarize"
    MAINTENANCE = "maintenance"
    WEBHOOKS = "webhooks"
    BATCH = "batch"
    """Jobs of batches: their own workers, so a large batch never delays interactive turns."""
    AGENTS = "agents"


QUEUES: Final = tuple(Queue)


def task_name(queue: Queue, task: str) -> str:
    """`cortex.<queue>.<task>`; `task="*"` gives the queue's routing pattern."""
    return f"cortex.{queue.value}.{task}"


RUN_MODEL_STEP: Final = task_name(Queue.LLM, "run_model_step")
RUN_TOOL_STEP: Final = task_name(Queue.TOOLS, "run_tool_step")
EXECUTE_PROPOSAL: Final = task_name(Queue.TOOLS, "execute_proposal")
POLL_TOOL_TASK: Final = task_name(Queue.TOOLS, "poll_tool_task")
RUN_SUMMARIZE_STEP: Final = task_name(Queue.SUMMARIZE, "run_summarize_step")
RECONCILE: Final = task_name(Queue.MAINTENANCE, "reconcile")
DISPATCH_WEBHOOKS: Final = task_name(Queue.MAINTENANCE, "dispatch_webhooks")
SWEEP_JOBS: Final = task_name(Queue.MAINTENANCE, "sweep_jobs")
DELIVER_WEBHOOK: Final = task_name(Queue.WEBHOOKS, "deliver")
RUN_JOB: Final = task_name(Queue.LLM, "run_job")
RUN_BATCH_JOB: Final = task_name(Queue.BATCH, "run_job")
FIRE_SCHEDULES: Final = task_name(Queue.MAINTENANCE, "fire_schedules")
RUN_AGENT_TASK: Final = task_name(Queue.AGENTS, "run_agent_task")
TAKE_OVER: Final = task_name(Queue.MAINTENANCE, "take_over")
APPLY_RETENTION: Final = task_name(Queue.MAINTENANCE, "apply_retention")
TICKS: Final = frozenset({RECONCILE, TAKE_OVER, SWEEP_JOBS, DISPATCH_WEBHOOKS, FIRE_SCHEDULES})
"""Beat's every-second maintenance passes: they send no task events (Flower does not list
them) and log no line of their own unless they did something (docs/operations.md)."""


@dataclass(frozen=True, slots=True)
class Route:
    """Which task runs a step, and on which queue."""

    task: str
    queue: Queue


def step_route(kind: StepKind) -> Route:
    """The task and queue of a step kind."""
    match kind:
        case StepKind.MODEL:
            return Route(RUN_MODEL_STEP, Queue.LLM)
        case StepKind.TOOL:
            return Route(RUN_TOOL_STEP, Queue.TOOLS)
        case StepKind.SUMMARIZE:
            return Route(RUN_SUMMARIZE_STEP, Queue.SUMMARIZE)
        case _:
            assert_never(kind)
