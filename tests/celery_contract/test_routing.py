"""Each queue receives its own tasks, and only those: a task sent by name alone is routed by the
app's configuration, and the dispatcher sends every step, job, delivery, proposal and agent task
to its queue, shown in Flower and task events by its ids only (`argsrepr`), never by content."""

from __future__ import annotations

import uuid

import pytest
from celery import Celery
from celery_support import TASKS, Broker, task_args

from cortex_workers import dispatch, queues
from cortex_workers.queues import Queue, step_route
from cortex_workers.turns.steps import AgentTaskRef, NextStep, TaskPollRef
from cortex_workers.vocabulary import StepKind

pytestmark = pytest.mark.servers


@pytest.mark.parametrize("name", sorted(TASKS))
def test_a_task_sent_by_name_waits_on_its_queue_and_no_other(
    app: Celery, broker: Broker, name: str
) -> None:
    app.send_task(name, args=["x"])
    waiting = broker.take_all()
    assert list(waiting) == [TASKS[name]]
    [message] = waiting[TASKS[name]]
    assert message.headers["task"] == name
    assert message.delivery_info["routing_key"] == TASKS[name].value


def test_the_dispatcher_sends_each_step_to_its_kinds_queue_with_its_ids_as_argsrepr(
    broker: Broker, depends_on_current_app: None
) -> None:
    turn, session = uuid.uuid4(), uuid.uuid4()
    steps = [NextStep(uuid.uuid4(), kind, turn_id=turn, session_id=session) for kind in StepKind]
    assert dispatch.publish(steps) == len(steps)
    waiting = broker.take_all()
    assert set(waiting) == {step_route(step.kind).queue for step in steps}
    for step in steps:
        route = step_route(step.kind)
        [message] = [m for m in waiting[route.queue] if m.headers["id"] == str(step.id)]
        assert message.headers["task"] == route.task
        assert task_args(message) == [str(step.id)]
        assert message.headers["argsrepr"] == (
            f"step={step.id} turn={turn} session={session} kind={step.kind.value}"
        )
        assert message.headers["kwargsrepr"] == ""


def test_jobs_deliveries_proposals_agent_tasks_and_polls_go_to_their_queues_by_their_ids(
    broker: Broker, depends_on_current_app: None
) -> None:
    job, batch_job, delivery, proposal = (uuid.uuid4() for _ in range(4))
    agent_task = AgentTaskRef(uuid.uuid4(), session_id=uuid.uuid4())
    poll = TaskPollRef(uuid.uuid4())
    dispatch.publish_jobs([job], batch=False)
    dispatch.publish_jobs([batch_job], batch=True)
    dispatch.publish_deliveries([(delivery, 2)])
    dispatch.publish_execution(proposal)
    assert dispatch.publish([agent_task, poll]) == 2
    sent = {
        (queue, m.headers["task"], m.headers["argsrepr"], m.headers["kwargsrepr"])
        + tuple(task_args(m))
        for queue, messages in broker.take_all().items()
        for m in messages
    }
    assert sent == {
        (Queue.LLM, queues.RUN_JOB, f"job={job}", "", str(job)),
        (Queue.BATCH, queues.RUN_BATCH_JOB, f"job={batch_job}", "", str(batch_job)),
        (Queue.WEBHOOKS, queues.DELIVER_WEBHOOK, f"delivery={delivery} attempt=3", "")
        + (str(delivery), 2),
        (Queue.TOOLS, queues.EXECUTE_PROPOSAL, f"proposal={proposal}", "", str(proposal)),
        (
            Queue.AGENTS,
            queues.RUN_AGENT_TASK,
            f"task={agent_task.id} session={agent_task.session_id}",
            "",
            str(agent_task.id),
        ),
        (Queue.TOOLS, queues.POLL_TOOL_TASK, f"parked={poll.id}", "", str(poll.id)),
    }
