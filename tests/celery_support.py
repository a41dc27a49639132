"""The Celery contract: every task and its queue; and the broker as its tests read it, the
messages waiting on each queue."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from celery import Celery
from kombu import Connection, Message
from kombu.simple import SimpleQueue

from cortex_workers import queues
from cortex_workers.queues import QUEUES, Queue

TASKS = {
    queues.RUN_MODEL_STEP: Queue.LLM,
    queues.RUN_JOB: Queue.LLM,
    queues.RUN_TOOL_STEP: Queue.TOOLS,
    queues.EXECUTE_PROPOSAL: Queue.TOOLS,
    queues.POLL_TOOL_TASK: Queue.TOOLS,
    queues.RUN_SUMMARIZE_STEP: Queue.SUMMARIZE,
    queues.RECONCILE: Queue.MAINTENANCE,
    queues.DISPATCH_WEBHOOKS: Queue.MAINTENANCE,
    queues.SWEEP_JOBS: Queue.MAINTENANCE,
    queues.FIRE_SCHEDULES: Queue.MAINTENANCE,
    queues.TAKE_OVER: Queue.MAINTENANCE,
    queues.APPLY_RETENTION: Queue.MAINTENANCE,
    queues.DELIVER_WEBHOOK: Queue.WEBHOOKS,
    queues.RUN_BATCH_JOB: Queue.BATCH,
    queues.RUN_AGENT_TASK: Queue.AGENTS,
}
"""Every task and the queue it belongs on."""


@dataclass
class Broker:
    """An app's broker connection, to take the messages off its queues."""

    app: Celery
    conn: Connection

    def take(self, queue: Queue) -> list[Message]:
        """Every message waiting on `queue`, taken off it."""
        taken = []
        with SimpleQueue(self.conn, self.app.amqp.queues[queue.value], no_ack=True) as simple:
            while True:
                try:
                    taken.append(simple.get_nowait())
                except simple.Empty:
                    return taken

    def take_all(self) -> dict[Queue, list[Message]]:
        """The messages of every queue that has some, taken off them."""
        found = {queue: self.take(queue) for queue in QUEUES}
        return {queue: messages for queue, messages in found.items() if messages}


@contextmanager
def broker_of(app: Celery) -> Iterator[Broker]:
    with app.connection_for_write() as conn:
        yield Broker(app, conn)


def task_args(message: Message) -> list[Any]:
    """The positional arguments of a task message (Celery's message protocol 2)."""
    args, _kwargs, _embed = message.decode()
    return list(args)
