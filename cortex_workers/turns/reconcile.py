"""The sweeper: re-publish lost steps, fail stuck turns visibly, promote queued turns.

Celery over Redis both loses and duplicates deliveries; Postgres is the queue of record, so this
pass (on beat, every few seconds) is what makes a lost message or a killed worker cost latency
instead of a turn.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

from ..observability.metrics import count_reconciler_action
from ..runtime import Runtime, get_runtime
from ..store import proposals as proposal_store
from ..store import repo, settlement
from ..store import steps as step_store
from ..store import workers as worker_store
from ..store.db import transaction
from ..vocabulary import StepKind, StepStatus, TurnStatus
from .agents.sweep import AgentSweep, sweep_agent_tasks
from .lifecycle import Ended, announce, fail_turn, promote_next
from .parked.sweep import resend_lost_polls
from .proposals import expire_due as expire_proposals
from .spend import report_alerts
from .steps import NextStep, Publish, TaskPollRef

log = logging.getLogger(__name__)
ORPHAN_GRACE_S = 1.0
"""A reservation younger than this is left alone (its call may be starting)."""

FORGET_WORKERS_AFTER_S = 3600.0
"""The row of a worker silent this long, holding nothing, is deleted."""


@dataclass
class Sweep:
    """What one pass did, for logs and tests."""

    republished: list[NextStep] = field(default_factory=list)
    failed: list[Ended] = field(default_factory=list)
    promoted: list[NextStep] = field(default_factory=list)
    expired_proposals: int = 0
    executions: list[uuid.UUID] = field(default_factory=list)
    """Confirmed proposals whose hand-over to the executor was lost."""
    lease_expired: int = 0
    """Of `republished`, steps whose worker stopped renewing its lease (crashed, killed)."""
    worker_gone: int = 0
    """Of `republished`, leased steps whose holder stopped beating (docs/reliability.md)."""
    deadline_failed: int = 0
    """Of `failed`, turns that ran past their deadline."""
    reservations_settled: int = 0
    """Budget reservations of calls no worker holds any more, settled at the reserved amount."""

    agents: AgentSweep = field(default_factory=AgentSweep)
    """Agent tasks timed out, ended with their sub-agent's turn, or sent again."""
    polls: list[TaskPollRef] = field(default_factory=list)
    """Polls of parked tool calls (their MCP server's task) sent again."""

    @property
    def publish(self) -> list[Publish]:
        return [
            *self.republished,
            *self.promoted,
            *self.agents.ended,
            *self.agents.resent,
            *self.polls,
        ]

    @property
    def acted(self) -> bool:
        """Whether the pass changed or re-sent anything."""
        return bool(
            self.republished
            or self.failed
            or self.promoted
            or self.expired_proposals
            or self.executions
            or self.reservations_settled
            or self.agents.ended
            or self.agents.resent
            or self.polls
        )


def reconcile() -> Sweep:
    rt = get_runtime()
    sweep = Sweep()
    _sweep_steps(rt, sweep)
    sweep.reservations_settled = _settle_orphaned_reservations(rt)
    for turn_id in _overdue(rt):
        ended, publish = fail_turn(
            rt,
            turn_id=turn_id,
            code="deadline_exceeded",
            message="the turn ran past its deadline and was stopped",
        )
        _record(rt, sweep, ended, publish)
        sweep.deadline_failed += ended is not None
    sweep.expired_proposals = expire_proposals(rt)
    with transaction(rt.db) as db:
        sweep.executions = list(
            proposal_store.stuck_confirmed(db, older_than_s=rt.settings.republish_after_s)
        )
    with transaction(rt.db) as db:
        worker_store.forget_dead(db, older_than_s=FORGET_WORKERS_AFTER_S)
    for session_id in _idle_with_queue(rt):
        with transaction(rt.db) as db:
            if repo.get_session(db, session_id, lock=True) is not None:
                sweep.promoted += promote_next(rt, db, session_id)
    sweep.agents = sweep_agent_tasks(rt)
    sweep.polls = resend_lost_polls(rt)
    _log(sweep)
    _count(sweep)
    return sweep


def take_over() -> Sweep:
    """The takeover pass (on beat, every `takeover_every_s`): only the steps' part of the
    sweep, which re-publishes the steps of workers that stopped beating (and anything else
    stale) without waiting for the full pass."""
    rt = get_runtime()
    sweep = Sweep()
    _sweep_steps(rt, sweep)
    _count(sweep)
    if sweep.acted:
        _log(sweep)
    return sweep


ACTIONS = (
    "republished",
    "lease_expired",
    "worker_gone",
    "deadline_failed",
    "attempts_exhausted",
    "promoted",
    "proposals_expired",
    "executions_resent",
    "reservations_settled",
    "agent_tasks_resent",
    "agent_tasks_ended",
    "tool_task_polls_resent",
)
"""The `action` label values of `cortex_reconciler_actions_total`, in the order `_count` counts
them (the API exposes each at 0 from its first scrape)."""


def _count(sweep: Sweep) -> None:
    """`cortex_reconciler_actions_total`, by action."""
    counts = (
        len(sweep.republished),
        sweep.lease_expired,
        sweep.worker_gone,
        sweep.deadline_failed,
        len(sweep.failed) - sweep.deadline_failed,
        len(sweep.promoted),
        sweep.expired_proposals,
        len(sweep.executions),
        sweep.reservations_settled,
        len(sweep.agents.resent),
        len(sweep.agents.ended),
        len(sweep.polls),
    )
    for action, n in zip(ACTIONS, counts, strict=True):
        count_reconciler_action(action, n)


def _log(sweep: Sweep) -> None:
    """One line per pass: at INFO when the pass did something, else at DEBUG (a pass runs
    every few seconds, and mostly finds nothing)."""
    log.log(
        logging.INFO if sweep.acted else logging.DEBUG,
        "reconcile: republished %d, failed %d, promoted %d, expired %d proposals, "
        "re-sent %d executions, settled %d reservations",
        len(sweep.republished),
        len(sweep.failed),
        len(sweep.promoted),
        sweep.expired_proposals,
        len(sweep.executions),
        sweep.reservations_settled,
    )


def _record(rt: Runtime, sweep: Sweep, ended: Ended | None, publish: list[NextStep]) -> None:
    announce(rt, ended)
    if ended is not None:
        sweep.failed.append(ended)
    sweep.promoted += publish


def _sweep_steps(rt: Runtime, sweep: Sweep) -> None:
    exhausted = []
    with transaction(rt.db) as db:
        settings = rt.settings
        stale = step_store.stale_steps(
            db,
            republish_after_s=settings.republish_after_s,
            liveness_s=settings.liveness_s,
        )
        for step in stale:
            turn = repo.get_turn(db, step.turn_id)
            if step.kind != StepKind.SUMMARIZE and (
                turn is None or turn.status != TurnStatus.RUNNING
            ):
                step.status = StepStatus.CANCELLED
                continue
            if step.status == StepStatus.LEASED and step.attempt >= rt.settings.max_attempts:
                exhausted.append((step.turn_id, step.id, step.attempt))
                continue
            if step.status == StepStatus.LEASED:
                expired = step.lease_until is not None and step.lease_until < repo.now()
                sweep.lease_expired += expired
                sweep.worker_gone += not expired
            step_store.mark_republished(db, step)
            session_id = turn.session_id if turn is not None else None
            again = NextStep(step.id, step.kind, turn_id=step.turn_id, session_id=session_id)
            sweep.republished.append(again)
    for turn_id, step_id, attempts in exhausted:
        ended, publish = fail_turn(
            rt,
            turn_id=turn_id,
            code="attempts_exhausted",
            message=f"a step of this turn was lost {attempts} times (workers crashing?)",
            failed_step_id=step_id,
        )
        _record(rt, sweep, ended, publish)


def _settle_orphaned_reservations(rt: Runtime) -> int:
    """A reservation whose worker died (the lease of its step or job expired, or another
    attempt or run, or the end of its turn or job, replaced its call) is settled at the
    reserved amount: the provider may have billed."""
    pct = rt.settings.llm_budget.alert_at_pct
    settled, alerts = settlement.settle_orphans(rt.engine, alert_at_pct=pct, grace_s=ORPHAN_GRACE_S)
    report_alerts(alerts, pct)
    return settled


def _overdue(rt: Runtime) -> list[uuid.UUID]:
    with transaction(rt.db) as db:
        return list(repo.overdue_turns(db))


def _idle_with_queue(rt: Runtime) -> list[uuid.UUID]:
    with transaction(rt.db) as db:
        return list(repo.sessions_needing_promotion(db))
