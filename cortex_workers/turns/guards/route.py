"""The provider call of a model step, guarded: the route (the router, mode `local-only`,
frugal's fast model), redaction before a non-local provider (failing closed), and the original
values restored into the answer before it is streamed and stored."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ...errors import TerminalError
from ...messages import JsonObject, ModelRequest
from ...privacy import PrivacyPolicy, Redacted, redact_messages
from ...providers.base import Provider
from ...providers.prompt_tools import PromptToolsProvider
from ...providers.registry import Route
from ...routing import RouteDecision
from ...runtime import Runtime
from ...store.steps import Claim
from ...vocabulary import LlmMode, TimelineKind
from ..context import ModelContext
from ..step_record import StepRecord
from .frugal import fast_route, with_note
from .modes import LOCAL_ONLY_CODE, local_providers, provider_is_local
from .route_choice import decide_route, routes_of


@dataclass(frozen=True, slots=True)
class CallPlan:
    """What one attempt of a model step sends, where, and how its answer is restored."""

    route: Route
    request: ModelRequest
    """As the provider receives it (redacted for a non-local provider)."""
    decision: RouteDecision | None = None
    restore: dict[str, str] = field(default_factory=dict, repr=False)
    redactions: dict[str, int] | None = None
    full: Route | None = None
    """Frugal: the full model an escalation goes to (`request` is then the fast call's)."""
    full_request: ModelRequest | None = None


def privacy_policy(rt: Runtime) -> PrivacyPolicy:
    """`[llm.privacy]`, with the configured provider keys always redacted as secrets."""
    p = rt.settings.llm_privacy
    keys = tuple(c.api_key for c in rt.providers.configs.values() if c.api_key)
    return PrivacyPolicy(
        redact_secrets=p.redact_secrets,
        redact_pii=p.redact_pii,
        restore=p.restore,
        patterns=dict(p.patterns),
        known_secrets=keys,
        timeout_s=p.timeout,
        phone_region=p.phone_region,
    )


def redact_for(rt: Runtime, provider: str, request: ModelRequest) -> Redacted | None:
    """The request's messages redacted for `provider`; None when nothing applies (a local
    provider, or nothing to redact). Raises `privacy.RedactionFailed`."""
    policy = privacy_policy(rt)
    if provider_is_local(rt, provider) or not policy.active:
        return None
    return redact_messages(request.messages, policy)


def pick_route(rt: Runtime, ctx: ModelContext, *, attempt: int) -> Route:
    """Attempts go to the session's provider, then to backups and fallbacks; providers that
    are cooling down are skipped."""
    registry = rt.providers
    routes = registry.routes(ctx.provider, ctx.model)
    if len(routes) == 1:
        return routes[0]
    cooling = set(rt.health.cooling([r.provider for r in routes]))
    return registry.choose(routes, attempt=attempt, cooling=cooling)


def provider_for(rt: Runtime, route: Route, request: ModelRequest) -> Provider:
    """The provider instance, speaking tools through the prompt when the model cannot."""
    provider = rt.providers.get(route.provider)
    if request.tools and not rt.providers.native_tools(route.provider, route.model):
        return PromptToolsProvider(provider)
    return provider


def _local_route(rt: Runtime, ctx: ModelContext, route: Route, attempt: int) -> Route:
    """Mode `local-only`: the route if local, else a local backup or fallback; else refused."""
    if provider_is_local(rt, route.provider):
        return route
    local = [
        r for r in rt.providers.routes(ctx.provider, ctx.model) if provider_is_local(rt, r.provider)
    ]
    if local:
        return rt.providers.choose(local, attempt=attempt, cooling=set())
    raise TerminalError(
        f"provider {route.provider!r} is not local and mode local-only is in force "
        f"(local providers: {', '.join(local_providers(rt)) or 'none'})",
        code=LOCAL_ONLY_CODE,
    )


def choose(
    rt: Runtime, ctx: ModelContext, request: ModelRequest, attempt: int
) -> tuple[Route, RouteDecision | None]:
    """This attempt's route: the router's chain when a route is asked for, else the session's
    provider with its backups and fallbacks; only local ones in mode `local-only`."""
    local_only = ctx.mode == LlmMode.LOCAL_ONLY
    if ctx.route is None:
        route = pick_route(rt, ctx, attempt=attempt)
        return (_local_route(rt, ctx, route, attempt) if local_only else route), None
    cooling = set(rt.health.cooling(rt.providers.names()))
    decision = decide_route(
        rt, ctx.route, request, depth=ctx.depth, local_only=local_only, cooling=cooling
    )
    routes = routes_of(decision)
    return rt.providers.choose(routes, attempt=attempt, cooling=cooling), decision


def _frugal(
    rt: Runtime, ctx: ModelContext, route: Route, request: ModelRequest
) -> tuple[Route, Route | None]:
    """Mode `frugal`, first call of the turn, no router: the fast model, the full one after."""
    if ctx.mode != LlmMode.FRUGAL or ctx.route is not None or route.fallback_from is not None:
        return route, None
    fast = fast_route(rt, route, depth=ctx.depth)
    return (route, None) if fast is None else (fast, route)


def preview_call(
    rt: Runtime, ctx: ModelContext, request: ModelRequest, *, attempt: int = 1
) -> CallPlan:
    """`plan_call` without a claim: nothing recorded, nothing sent (the dry run). Raises the
    same `TerminalError`s."""
    route, decision = choose(rt, ctx, request, attempt)
    route, full = _frugal(rt, ctx, route, request)
    request = replace(request, model=route.model)
    redacted = redact_for(rt, route.provider, request)
    if redacted is not None:
        request = replace(request, messages=redacted.messages)
    return CallPlan(
        route=route,
        request=with_note(request, route.model) if full is not None else request,
        decision=decision,
        restore=redacted.restore if redacted and rt.settings.llm_privacy.restore else {},
        redactions=redacted.counts if redacted is not None and redacted.counts else None,
        full=full,
        full_request=replace(request, model=full.model) if full is not None else None,
    )


def plan_call(
    rt: Runtime, claim: Claim, ctx: ModelContext, request: ModelRequest, record: StepRecord
) -> CallPlan:
    """Route, then redact (fail closed: `RedactionFailed` means nothing may be sent); the
    decision and the counts go into the step's record. Raises `TerminalError`s: `no_route`,
    `local_only`, `redaction_failed`."""
    plan = preview_call(rt, ctx, request, attempt=claim.attempt)
    record.routed(route_record(plan), plan.redactions)
    note_plan(record, claim, plan)
    return plan


def note_plan(record: StepRecord, claim: Claim, plan: CallPlan) -> None:
    """The timeline's `route` event (and `fallback` when the route is not the first choice,
    `redaction` when something was replaced)."""
    route = plan.route
    chosen = {"provider": route.provider, "model": route.model, "attempt": claim.attempt}
    why = route_record(plan) or {"reason": "the session's provider and model"}
    events: list[tuple[TimelineKind, dict[str, object]]] = [
        (TimelineKind.ROUTE, {**why, **chosen, "fallback_from": route.fallback_from})
    ]
    if route.fallback_from is not None:
        events.append((TimelineKind.FALLBACK, {**chosen, "from": route.fallback_from}))
    if plan.redactions:
        events.append((TimelineKind.REDACTION, {"counts": plan.redactions, **chosen}))
    for kind, data in events:
        record.note(kind, data)


def route_record(plan: CallPlan) -> JsonObject | None:
    """What the step records as `route`: the router's decision, or frugal's plan."""
    if plan.decision is not None:
        return plan.decision.as_json()
    if plan.full is None:
        return None
    return {
        "provider": plan.route.provider,
        "model": plan.route.model,
        "tier": "fast",
        "reason": "mode frugal: the turn's first call goes to the provider's fast model",
        "rejected": [],
        "fallbacks": [{"provider": plan.full.provider, "model": plan.full.model, "tier": None}],
    }


def rerouted(plan: CallPlan, route: Route, request: ModelRequest) -> CallPlan:
    """The plan sent to another route after it was made (the budget's local provider): that
    route's request as given, without frugal's escalation."""
    if route == plan.route and request is plan.request:
        return plan
    return replace(plan, route=route, request=request, full=None, full_request=None)
