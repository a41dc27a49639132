"""A model call's budget (docs/cost-and-privacy.md): where a limit applies, its maximum cost is
reserved before it runs, in one statement (`store.budget.reserve`); where none does, nothing
is written before it. Either way what the call cost is appended to the step's record and
written by the statement that ends the step: the reservation settled at the real cost (or at
what it held, when the call did not finish), or the call's usage row, and the counters.

A call that does not fit what is left of a limit ends the turn `failed` with
`budget_exhausted` (or `session_token_cap`), visibly; with `on_exhausted = "local"` it goes on
with the configured local provider and a warning on the turn.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, replace

from ...budget import (
    BUDGET_EXHAUSTED,
    SESSION_TOKEN_CAP,
    CallEstimate,
    call_cost_micros,
    estimate_call,
)
from ...budget.policy import BudgetExhausted
from ...messages import Completion, ModelRequest
from ...providers.registry import Route
from ...runtime import Runtime
from ...store import budget as budget_store
from ...store.budget import CallToReserve, Refusal, Reservation
from ...store.claims import Claim
from ...store.step_record_rows import Spend
from ...vocabulary import BudgetScope, TimelineKind
from ..step_plan import BudgetPlan
from ..step_record import StepRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Hold:
    """What a call holds: a reservation where a limit applies, else only its estimate."""

    amount_micros: int
    tokens: int
    reservation: Reservation | None = None


@dataclass(frozen=True, slots=True)
class Admitted:
    """The call may go ahead on `route` with `request`, holding `hold`."""

    route: Route
    request: ModelRequest
    hold: Hold
    call_no: int = 0


@dataclass(frozen=True, slots=True)
class Exhausted:
    """No budget for the call: the turn ends `failed` with this error."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class Caller:
    """Whose call it is: the claimed step, its tenant, session and end user."""

    claim: Claim
    tenant_id: uuid.UUID
    session_id: uuid.UUID
    user: str | None


def estimate(rt: Runtime, route: Route, request: ModelRequest) -> CallEstimate:
    """The call's maximum (and expected) cost at the route's prices."""
    price = rt.providers.price(route.provider, route.model)
    config = rt.providers.configs.get(route.provider)
    return estimate_call(
        request,
        input_per_mtok=price.input_per_mtok,
        output_per_mtok=price.output_per_mtok,
        max_tokens=config.max_tokens if config is not None else 4096,
    )


def hold(
    rt: Runtime,
    caller: Caller,
    budget: BudgetPlan,
    route: Route,
    request: ModelRequest,
    record: StepRecord,
    *,
    call_no: int = 0,
) -> Hold | Refusal:
    """Reserve the call's maximum cost where a limit applies (one statement), else hold its
    estimate only; the timeline's `budget` event either way."""
    cost = estimate(rt, route, request)
    tokens = cost.input_tokens + cost.max_output_tokens
    held: Hold | Refusal = Hold(cost.cost_micros_max, tokens)
    if budget.limited:
        claim = caller.claim
        reserved = budget_store.reserve(
            rt.engine,
            CallToReserve(
                step_id=claim.step_id,
                attempt=claim.attempt,
                turn_id=claim.turn_id,
                tenant_id=caller.tenant_id,
                session_id=caller.session_id,
                user=caller.user,
                provider=route.provider,
                model=route.model,
                amount_micros=cost.cost_micros_max,
                tokens=tokens,
                call_no=call_no,
                scopes=budget.scopes,
                session_tokens=budget.session_tokens,
            ),
        )
        held = (
            reserved
            if isinstance(reserved, Refusal)
            else Hold(reserved.amount_micros, reserved.tokens, reserved)
        )
    _note_hold(record, route, caller.claim.attempt, held)
    return held


def _note_hold(record: StepRecord, route: Route, attempt: int, held: Hold | Refusal) -> None:
    where = {"provider": route.provider, "model": route.model, "attempt": attempt}
    if isinstance(held, Hold):
        data: dict[str, object] = {
            "action": "reserved",
            "amount_usd": held.amount_micros / 1e6,
            "tokens": held.tokens,
        }
    else:
        data = {
            "action": "refused",
            "scope": str(held.scope),
            "limit": held.limit,
            "spent": held.spent,
            "asked": held.asked,
        }
    record.note(TimelineKind.BUDGET, {**data, **where})


def admit(
    rt: Runtime,
    caller: Caller,
    budget: BudgetPlan,
    route: Route,
    request: ModelRequest,
    record: StepRecord,
) -> Admitted | Exhausted:
    """Hold the call, or say why the turn must end for want of budget (see the module)."""
    held = hold(rt, caller, budget, route, request, record)
    if isinstance(held, Hold):
        return Admitted(route, request, held)
    config = rt.settings.llm_budget
    local = config.local_provider
    if (
        config.on_exhausted == "local"
        and held.scope is not BudgetScope.SESSION
        and route.provider != local
        and not rt.providers.unavailable(local)
    ):
        local_route = Route(local, rt.providers.default_model(local), route.provider)
        message = (
            f"the {held.scope} budget cannot take this call; it went to the local provider "
            f"{local!r} instead"
        )
        log.warning("turn %s: %s", caller.claim.turn_id, message)
        record.warn(BUDGET_EXHAUSTED, message)
        local_request = replace(request, model=local_route.model)
        return admit(rt, caller, budget, local_route, local_request, record)
    return exhausted(held)


def exhausted(refusal: Refusal) -> Exhausted:
    """The error a refused call ends its turn with."""
    if refusal.scope is BudgetScope.SESSION:
        return Exhausted(
            SESSION_TOKEN_CAP,
            f"this session reached its cap of {refusal.limit} tokens "
            f"({refusal.spent} used); start a new session",
        )
    error = BudgetExhausted(
        scope=refusal.scope, limit=refusal.limit, spent=refusal.spent, resets_at=refusal.resets_at
    )
    return Exhausted(BUDGET_EXHAUSTED, error.message)


def spent(
    rt: Runtime,
    caller: Caller,
    budget: BudgetPlan,
    admitted: Admitted,
    record: StepRecord,
    answered: tuple[Completion, Route] | None,
) -> None:
    """The call's spend appended to the record: its real cost when it `answered` (with the
    route that did), else what it held; and the timeline's `budget` settlement."""
    cost = _cost(rt, admitted, answered)
    money = budget_store.money_keys(caller.tenant_id)
    day = budget.day.window
    reservation = admitted.hold.reservation
    if reservation is not None:
        tokens = None if cost.input_tokens is None else cost.input_tokens + cost.output_tokens
        moves = budget_store.settlement_moves(
            reservation,
            money=money,
            session_key=budget.scopes[2].key,
            resets_at=day.resets_at,
            cost_micros=cost.micros,
            used_tokens=tokens,
        )
        spend_id, day_start = reservation.id, reservation.day_start
    else:
        charged = admitted.hold.amount_micros if cost.micros is None else cost.micros
        moves = budget_store.usage_moves(money=money, day=day, cost_micros=charged)
        spend_id, day_start = uuid.uuid4(), day.start
    record.spent(
        Spend(
            id=spend_id,
            held=reservation is not None,
            call_no=admitted.call_no,
            provider=admitted.route.provider,
            model=admitted.route.model,
            amount_micros=admitted.hold.amount_micros,
            tokens=admitted.hold.tokens,
            cost_micros=cost.micros,
            input_tokens=cost.input_tokens,
            output_tokens=cost.output_tokens if cost.input_tokens is not None else None,
            by=cost.by,
            day_start=day_start,
            moves=moves,
        )
    )
    settled = cost.micros if cost.micros is not None else admitted.hold.amount_micros
    data = {"action": "settled", "by": cost.by, "cost_usd": settled / 1e6}
    record.note(TimelineKind.BUDGET, data)


@dataclass(frozen=True, slots=True)
class _Cost:
    micros: int | None
    """None: the call did not finish; it costs what it held."""
    input_tokens: int | None = None
    output_tokens: int = 0
    by: str = "failure"


def _cost(rt: Runtime, admitted: Admitted, answered: tuple[Completion, Route] | None) -> _Cost:
    """What the call cost at the prices of the route that answered (list price of the tokens
    the provider reported)."""
    if answered is None:
        return _Cost(None)
    done, route = answered
    price = rt.providers.price(route.provider, route.model)
    micros = call_cost_micros(
        done.input_tokens,
        done.output_tokens,
        input_per_mtok=price.input_per_mtok,
        output_per_mtok=price.output_per_mtok,
    )
    if micros > admitted.hold.amount_micros:
        log.warning(
            "a call cost %d micro-dollars, more than the %d reserved (the provider counted "
            "more tokens than the request's size bounds)",
            micros,
            admitted.hold.amount_micros,
        )
    return _Cost(micros, done.input_tokens, done.output_tokens, "call")
