"""The step plan: what a model step needs to know to decide which features apply, resolved
from its claim (one statement: `store.claims.claim_model_step`), with no I/O after it.

A feature that is off is absent from the plan: no budget scope with a limit, no reservation;
no whiteboard, no summary; no limit on tool calls, no counts. What the claim reads for an
optional feature is switched by `switches` (from the configuration) or by the row itself (a
`CASE` in SQL), so it costs nothing when the feature is off.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from ..budget import Limits, day_window, forever, resolve_limits
from ..runtime import Runtime
from ..store.budget import ScopeLimit
from ..store.claims import PlanParams
from ..store.step_views import BatchCall, ModelStepView
from ..store.whiteboard import BoardDoc, board_of
from ..vocabulary import BudgetScope, RecoveryAction
from ..whiteboard import summarize


@dataclass(frozen=True, slots=True)
class BudgetPlan:
    """The counters a call of this step goes through (each with its limit, None: counted
    only), and what the session has used."""

    scopes: tuple[ScopeLimit, ...]
    limits: Limits
    session_tokens: int

    @property
    def limited(self) -> bool:
        """A limit applies: a call reserves before it runs."""
        return any(s.limit is not None for s in self.scopes)

    @property
    def day(self) -> ScopeLimit:
        return self.scopes[0]


@dataclass(frozen=True, slots=True)
class StepPlan:
    """See the module's doc."""

    budget: BudgetPlan
    user: str | None
    """The turn's end user (else the session's)."""
    whiteboard: str | None
    """The summary of the session's whiteboard, shown in its context (None: no board)."""
    parent_whiteboard: str | None
    """A sub-agent's: the summary of its parent session's whiteboard."""
    child: bool
    """The session is a sub-agent's (its turn's end ends the agent's task)."""
    tool_counts: dict[str, int] | None
    """The turn's calls per tool, when a limit on tool calls may apply."""
    retried: tuple[int, ...] | None
    """The steps a recovery `retry` ran again, when that action is configured."""
    batch: tuple[BatchCall, ...]
    """The previous model step's tool calls, with their results (after a tool batch)."""


def switches(rt: Runtime) -> PlanParams:
    """What the claim reads beyond the context, from the configuration."""
    cfg = rt.settings.recovery
    return PlanParams(
        window=rt.settings.history_window,
        tool_limits=cfg.tool_call_limit is not None or bool(cfg.tool_call_limits),
        recoveries=RecoveryAction.RETRY in cfg.actions.values(),
    )


def budget_plan(
    rt: Runtime,
    *,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    limits: Limits,
    session_tokens: int = 0,
) -> BudgetPlan:
    """The scopes of a call of the tenant's session, today, with the limits in force."""
    day = day_window(datetime.now(UTC), rt.settings.llm_budget.budget_timezone)
    scopes = (
        ScopeLimit(BudgetScope.GLOBAL, "global", day, limits.global_daily_micros),
        ScopeLimit(BudgetScope.TENANT, f"tenant:{tenant_id}", day, limits.tenant_daily_micros),
        ScopeLimit(
            BudgetScope.SESSION, f"session:{session_id}", forever(), limits.session_token_cap
        ),
    )
    return BudgetPlan(scopes, limits, session_tokens)


def resolve(rt: Runtime, view: ModelStepView) -> StepPlan:
    """The plan of a claimed model step, from what its claim read."""
    limits = resolve_limits(
        rt.settings.llm_budget,
        tenant_daily_micros=view.tenant_daily_micros,
        per_user_hourly=view.tenant_user_hourly,
        session_token_cap=view.tenant_session_cap,
    )
    budget = budget_plan(
        rt,
        tenant_id=view.tenant_id,
        session_id=view.session_id,
        limits=limits,
        session_tokens=view.session_tokens,
    )
    return StepPlan(
        budget=budget,
        user=view.user,
        whiteboard=_summary(view.session_id, view.board),
        parent_whiteboard=_summary(view.parent_session_id, view.parent_board),
        child=view.parent_session_id is not None,
        tool_counts=view.tool_counts,
        retried=tuple(view.retried or ()) if view.retried is not None else None,
        batch=tuple(view.batch or ()),
    )


def _summary(session_id: uuid.UUID | None, board: BoardDoc | None) -> str | None:
    if board is None or session_id is None:
        return None
    return summarize(board_of(session_id, board))
