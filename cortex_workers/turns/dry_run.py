"""A turn's dry run: where its first call would go, what it may cost, whether the budget takes
it and what would be redacted. Nothing is stored, reserved or sent to any provider."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..budget import CallEstimate, estimate_call, micros_to_usd
from ..errors import InvalidRequest, NotFound
from ..messages import JsonObject, Message, ModelRequest
from ..providers.registry import Route
from ..runtime import Runtime
from ..store import repo, tenant_admin
from ..store.db import transaction
from ..store.models import Session
from ..vocabulary import BudgetScope
from .context import ModelContext, coherent, system_messages, to_message
from .guards.admission import money_states
from .guards.modes import mode_in_force, route_spec
from .guards.route import preview_call, route_record


@dataclass(frozen=True, slots=True)
class DryRun:
    """The answer of `"dry_run": true`."""

    route: JsonObject
    """The router's decision, as a step records it."""
    estimate: CallEstimate
    fits: bool
    remaining_micros: int | None
    """What the tightest daily budget has left (None: no daily limit applies)."""
    redactions: dict[str, int]

    def as_json(self) -> JsonObject:
        e = self.estimate
        return {
            "dry_run": True,
            "route": self.route,
            "estimate": {
                "input_tokens": e.input_tokens,
                "max_output_tokens": e.max_output_tokens,
                "cost_usd_expected": micros_to_usd(e.cost_micros_expected),
                "cost_usd_max": micros_to_usd(e.cost_micros_max),
            },
            "budget": {
                "fits": self.fits,
                "remaining_usd": micros_to_usd(self.remaining_micros)
                if self.remaining_micros is not None
                else None,
            },
            "redactions": {**self.redactions},
        }


def _context(
    rt: Runtime,
    session: Session,
    content: str,
    turn_route: JsonObject | None,
    images: tuple[str, ...] = (),
) -> ModelContext:
    """What the turn's first model step would read: the same prompt, summary and window."""
    window = rt.settings.history_window
    with transaction(rt.db) as db:
        earlier = repo.messages_between(
            db,
            session.id,
            after=max(session.last_message_seq - (window - 1), 0),
            upto=session.last_message_seq,
        )
        history = [to_message(m) for m in earlier]
        tenant_mode = tenant_admin.overrides_of(db, session.tenant_id).mode
    try:
        tools = rt.tools.specs(None if session.tools is None else rt.tools.expand(session.tools))
    except ValueError as exc:
        raise InvalidRequest(
            f"the session names a tool that is not registered: {exc}", code="tool_unknown"
        ) from exc
    prompt = (
        session.system_prompt if session.system_prompt is not None else rt.settings.system_prompt
    )
    messages = system_messages(prompt, session.summary, tools=bool(tools)) + coherent(
        [*history, Message(role="user", content=content, images=images)]
    )
    provider, model = rt.providers.resolve(session.provider, session.model)
    script = (session.metadata_ or {}).get("script")
    return ModelContext(
        session_id=session.id,
        tenant_id=session.tenant_id,
        turn_id=uuid.uuid4(),
        provider=provider,
        model=model,
        messages=tuple(messages),
        tools=tuple(tools),
        script=tuple(script) if isinstance(script, list) and script else None,
        depth=1,
        parent_step_no=None,
        mode=mode_in_force(rt.settings, tenant=tenant_mode, session=session.mode),
        route=route_spec(turn_route, session.route, model=session.model),
    )


def _estimate(rt: Runtime, route: Route, request: ModelRequest) -> CallEstimate:
    price = rt.providers.price(route.provider, route.model)
    config = rt.providers.configs.get(route.provider)
    return estimate_call(
        request,
        input_per_mtok=price.input_per_mtok,
        output_per_mtok=price.output_per_mtok,
        max_tokens=config.max_tokens if config is not None else 4096,
    )


def _plus(first: CallEstimate, escalation: CallEstimate) -> CallEstimate:
    """Frugal's first call and the escalation it may need: both may be billed."""
    return CallEstimate(
        input_tokens=max(first.input_tokens, escalation.input_tokens),
        max_output_tokens=first.max_output_tokens + escalation.max_output_tokens,
        expected_input_tokens=first.expected_input_tokens,
        cost_micros_max=first.cost_micros_max + escalation.cost_micros_max,
        cost_micros_expected=first.cost_micros_expected,
    )


def dry_run(
    rt: Runtime,
    *,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    content: str,
    turn_route: JsonObject | None = None,
    images: tuple[str, ...] = (),
) -> DryRun:
    """Plan the turn's first call as a model step would, without storing or sending it."""
    with transaction(rt.db) as db:
        session = repo.get_session(db, session_id, tenant_id=tenant_id)
    if session is None:
        raise NotFound(f"session {session_id} not found")
    ctx = _context(rt, session, content, turn_route, images)
    request = ModelRequest(model=ctx.model, messages=ctx.messages, tools=ctx.tools)
    plan = preview_call(rt, ctx, request)  # routed and redacted as the step would, unsent
    estimate = _estimate(rt, plan.route, plan.request)
    if plan.full is not None and plan.full_request is not None:  # frugal may call twice
        estimate = _plus(estimate, _estimate(rt, plan.full, plan.full_request))
    states = money_states(rt, tenant_id, session_id)
    remaining = [s.remaining for s in states if s.scope is not BudgetScope.SESSION]
    known = [r for r in remaining if r is not None]
    tokens = next(s for s in states if s.scope is BudgetScope.SESSION).remaining
    fits = all(r >= estimate.cost_micros_max for r in known) and (
        tokens is None or tokens >= estimate.input_tokens + estimate.max_output_tokens
    )
    shown = route_record(plan) or {}
    return DryRun(
        route={**shown, "provider": plan.route.provider, "model": plan.route.model},
        estimate=estimate,
        fits=fits,
        remaining_micros=min(known) if known else None,
        redactions=dict(plan.redactions or {}),
    )
