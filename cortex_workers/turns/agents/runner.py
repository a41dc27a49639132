"""Running a `python` or `a2a` agent task on the `agents` queue: claimed with a lease (a
redelivery while another runner holds it does nothing), the lease renewed while it runs, its
end stored once, fenced by the claim's attempt."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from ...agents.a2a import RemoteCall, run_remote
from ...agents.cards import A2aCard, AgentCard, PythonCard
from ...agents.python import AgentContext, Outcome, run_handler
from ...errors import TerminalError
from ...messages import JsonObject
from ...runtime import Runtime, get_runtime
from ...store import agent_tasks, repo
from ...store.db import transaction
from ...store.models import AgentTask, Tenant
from ...vocabulary import LlmMode, TaskStatus
from ..guards import provider_gate
from ..guards.modes import mode_in_force
from ..steps import NextStep
from .results import announce_task, complete


def run_agent_task(task_id: uuid.UUID) -> list[NextStep]:
    """Run one delivery of an agent task; returns what its end asks to publish."""
    rt = get_runtime()
    with transaction(rt.db) as db:
        claimed = agent_tasks.claim(db, task_id, lease_s=rt.settings.lease_s)
    if claimed is None:
        return []  # a duplicate delivery, or the task has ended
    task, attempt = claimed
    announce_task(rt, task)
    card = rt.agents.get(task.agent)
    outcome = _run(rt, task, attempt, card)
    if outcome is None:
        return []
    return complete(
        rt,
        task_id,
        status=outcome.status,
        attempt=attempt,
        result=outcome.result,
        error=outcome.error,
    )


def _run(rt: Runtime, task: AgentTask, attempt: int, card: AgentCard | None) -> Outcome | None:
    left = _seconds_left(task)
    if card is None:
        message = f"the agent {task.agent!r} is not configured here"
        return Outcome(TaskStatus.FAILED, error={"code": "agent_unknown", "message": message})
    if left <= 0:
        message = f"the agent did not answer within {card.timeout_s:g} s"
        return Outcome(TaskStatus.FAILED, error={"code": "timeout", "message": message})

    def still_ours() -> bool:
        with transaction(rt.db) as db:
            return agent_tasks.renew(db, task.id, attempt, lease_s=rt.settings.lease_s)

    if not isinstance(card, PythonCard | A2aCard):
        message = f"the agent {task.agent!r} does not run on the agents queue"
        return Outcome(TaskStatus.FAILED, error={"code": "agent_error", "message": message})
    try:  # an agent receives what a non-local provider would (docs/security.md)
        if isinstance(card, A2aCard):
            provider_gate.check_remote_agent(card.name, card.url, mode=_mode(rt, task))
        gated = provider_gate.guard_handler_input(rt, dict(task.input or {}))
    except TerminalError as exc:  # not local in local-only, or redaction failed: nothing runs
        return Outcome(TaskStatus.FAILED, error={"code": exc.code, "message": exc.message})
    if isinstance(card, PythonCard):
        ctx = AgentContext(str(task.id), str(task.session_id), _reporter(rt, task.id, attempt))
        outcome = run_handler(
            card.handler,
            gated.value,
            ctx,
            timeout_s=left,
            budget_s=card.timeout_s,
            check_every_s=max(0.2, rt.settings.lease_s / 3),
            still_ours=still_ours,
        )
    else:
        call = _remote_call(rt, task, attempt, card, left, still_ours, input_=gated.value)
        outcome = run_remote(card, call)
    if outcome is None or outcome.status != TaskStatus.COMPLETED:
        return outcome
    return replace(outcome, result=provider_gate.restored_answer(outcome.result, gated))


def _mode(rt: Runtime, task: AgentTask) -> LlmMode:
    """The mode in force for the task's session (the configuration's, tenant's, session's)."""
    with transaction(rt.db) as db:
        session = repo.get_session(db, task.session_id)
        tenant = db.get(Tenant, task.tenant_id)
    return mode_in_force(
        rt.settings,
        tenant=tenant.mode if tenant is not None else None,
        session=session.mode if session is not None else None,
    )


def _remote_call(
    rt: Runtime,
    task: AgentTask,
    attempt: int,
    card: A2aCard,
    left: float,
    still_ours: Callable[[], bool],
    *,
    input_: JsonObject,
) -> RemoteCall:
    text = str(input_["task"]) if set(input_) == {"task"} else json.dumps(input_)

    def remember(remote_id: str) -> None:
        with transaction(rt.db) as db:
            agent_tasks.remember_remote(db, task.id, attempt, remote_id)

    return RemoteCall(
        text=text,
        message_id=str(task.id),
        remote_task_id=task.remote_task_id,
        remember=remember,
        timeout_s=left,
        budget_s=card.timeout_s,
        still_ours=still_ours,
    )


def _seconds_left(task: AgentTask) -> float:
    if task.deadline is None:
        return 0.0
    return (task.deadline - datetime.now(UTC)).total_seconds()


def _reporter(rt: Runtime, task_id: uuid.UUID, attempt: int) -> _Report:
    return _Report(rt, task_id, attempt)


class _Report:
    """`ctx.progress`: stored (fenced by the attempt) and sent on the session's stream."""

    def __init__(self, rt: Runtime, task_id: uuid.UUID, attempt: int) -> None:
        self.rt, self.task_id, self.attempt = rt, task_id, attempt

    def __call__(self, fraction: float, note: str) -> None:
        with transaction(self.rt.db) as db:
            task = agent_tasks.report_progress(
                db, self.task_id, self.attempt, {"fraction": fraction, "note": note}
            )
        if task is not None:
            announce_task(self.rt, task)
