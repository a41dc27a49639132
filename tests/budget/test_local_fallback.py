"""With `on_exhausted = "local"`, a call the budget cannot take goes to the local provider,
and the turn says so."""

from __future__ import annotations

from typing import Literal

from budget_support import held_step, new_tenant
from support import Stack

from cortex_workers.budget_settings import BudgetSettings
from cortex_workers.messages import Message, ModelRequest
from cortex_workers.providers.registry import Route
from cortex_workers.runtime import Runtime, get_runtime
from cortex_workers.store import repo
from cortex_workers.store.claims import Claim, model_step_view
from cortex_workers.store.db import transaction
from cortex_workers.turns import step_plan
from cortex_workers.turns.closing import close_model_step
from cortex_workers.turns.context import ModelContext
from cortex_workers.turns.guards import budget
from cortex_workers.turns.outcome import Fail, Retry
from cortex_workers.turns.step_plan import StepPlan
from cortex_workers.turns.step_record import StepRecord
from cortex_workers.vocabulary import StepKind, TurnStatus


def _call(
    stop_or_local: Literal["stop", "local"],
) -> tuple[Runtime, Claim, ModelContext, ModelRequest]:
    tenant_id, _ = new_tenant({"daily_usd_limit_micros": 10_000})  # $0.01: gpt-4o won't fit
    session_id, turn_id, step_id = held_step(tenant_id)
    base = get_runtime()
    settings = base.settings.model_copy(
        update={"llm_budget": BudgetSettings(on_exhausted=stop_or_local, local_provider="ollama")}
    )
    rt = Runtime(settings)
    claim = Claim(step_id, turn_id, 1, StepKind.MODEL, 1, None, 0, None)
    messages = (Message(role="user", content="hello"),)
    ctx = ModelContext(
        session_id, tenant_id, turn_id, "openai", "gpt-4o", messages, (), None, 1, None
    )
    return rt, claim, ctx, ModelRequest(model="gpt-4o", messages=messages)


def _admit(
    rt: Runtime, claim: Claim, ctx: ModelContext, request: ModelRequest, record: StepRecord
) -> tuple[budget.Admitted | budget.Exhausted, StepPlan]:
    with transaction(rt.db) as db:
        view = model_step_view(db, claim.step_id, window=20)
    plan = step_plan.resolve(rt, view)
    caller = budget.Caller(claim, ctx.tenant_id, ctx.session_id, None)
    route = Route("openai", "gpt-4o")
    return budget.admit(rt, caller, plan.budget, route, request, record), plan


def test_on_exhausted_local_goes_on_with_the_local_provider_and_a_warning(stack: Stack) -> None:
    rt, claim, ctx, request = _call("local")
    record = StepRecord(claim.step_no)
    admitted, plan = _admit(rt, claim, ctx, request, record)
    assert isinstance(admitted, budget.Admitted)
    assert admitted.route.provider == "ollama"
    assert admitted.request.model == admitted.route.model
    assert admitted.hold.amount_micros == 0  # a local call is free
    # the warning is written with the step's ending (here: a retry, the turn goes on)
    close_model_step(rt, claim, ctx, plan, record, Retry(0.0, {"code": "x"}, 2))
    with transaction(rt.db) as db:
        turn = repo.get_turn(db, claim.turn_id)
        assert turn is not None and turn.status == TurnStatus.RUNNING
        assert [w["code"] for w in turn.warnings or []] == ["budget_exhausted"]
    rt.close()


def test_on_exhausted_stop_fails_the_turn_with_budget_exhausted(stack: Stack) -> None:
    rt, claim, ctx, request = _call("stop")
    record = StepRecord(claim.step_no)
    exhausted, plan = _admit(rt, claim, ctx, request, record)
    assert isinstance(exhausted, budget.Exhausted)
    outcome = Fail(exhausted.code, exhausted.message)
    assert close_model_step(rt, claim, ctx, plan, record, outcome) == []
    with transaction(rt.db) as db:
        turn = repo.get_turn(db, claim.turn_id)
        assert turn is not None and turn.status == TurnStatus.FAILED
        assert turn.error is not None and turn.error["code"] == "budget_exhausted"
    rt.close()
