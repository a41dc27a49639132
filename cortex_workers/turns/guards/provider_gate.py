"""The provider gate: every provider call that is not a model step's goes through here
(summaries, LLM-function jobs and batches, and whatever path comes next), so none can skip
what a model step guarantees (docs/security.md):

- mode `local-only`: only a local provider is called (a local backup or fallback stands in;
  none: `TerminalError` `local_only`, and 0 requests leave);
- redaction before a non-local provider, failing closed (`RedactionFailed`: nothing is sent),
  and the original values restored into the answer;
- the provider's shared rate limits (waited for; a job has no step to defer);
- the budget: the caller's reservation is taken before the call and settled after it;
- the call's span and metrics (`observe.model_call`).

An agent is a recipient of the same kind: a `python` agent's handler is operator code that
may send what it receives anywhere, outside this gate, and an `a2a` agent is a service
elsewhere. `guard_handler_input` gives either what a non-local provider would receive
(redacted, failing closed) and `restored_answer` puts the values back into its answer. A
python handler runs on our workers, so mode `local-only` lets it run; an A2A agent runs in
`local-only` only at a loopback or private address (`check_remote_agent`).

A model step does the same with the same primitives inline (`guards.route`, `guards.budget`,
`guards.restore`), because it records them in the step's one closing statement; a test
(tests/privacy/test_provider_gate_paths.py) fails when any other module calls a provider.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ...errors import TerminalError
from ...messages import Completion, JsonObject, ModelRequest, ToolCall
from ...privacy import redact_value, restore_text, restore_value
from ...providers.base import collect
from ...providers.locality import private_address
from ...providers.registry import Route
from ...routing import RouteSpec
from ...runtime import Runtime
from ...vocabulary import LlmMode, ModelTier
from ..observe import model_call
from ..spend import Admitted, settling
from .modes import LOCAL_ONLY_CODE, local_providers, provider_is_local
from .rate_limit import record_output_tokens, take_rate_limit
from .route import privacy_policy, redact_for
from .route_choice import decide_route

Reserve = Callable[[Route, ModelRequest], Admitted]
"""Hold the call's maximum cost (raise a `TerminalError` `budget_exhausted` when refused)."""


@dataclass(frozen=True, slots=True)
class Gated:
    """A call that passed the gate's checks: where it goes, what the provider receives
    (redacted for a non-local one), and how its answer is restored."""

    route: Route
    request: ModelRequest
    restore: dict[str, str] = field(default_factory=dict, repr=False)
    redactions: dict[str, int] | None = None


def local_route(rt: Runtime, route: Route) -> Route:
    """Mode `local-only`: the route if local, else its first local backup or fallback; else
    `TerminalError` `local_only`."""
    if provider_is_local(rt, route.provider):
        return route
    for candidate in rt.providers.routes(route.provider, route.model):
        if provider_is_local(rt, candidate.provider):
            return candidate
    raise TerminalError(
        f"provider {route.provider!r} is not local and mode local-only is in force "
        f"(local providers: {', '.join(local_providers(rt)) or 'none'})",
        code=LOCAL_ONLY_CODE,
    )


def guard(
    rt: Runtime, route: Route, request: ModelRequest, *, mode: LlmMode, routed: bool = False
) -> Gated:
    """The checks before a call: the route (a routed session's summaries go to the cheapest
    fast model; only local providers in mode `local-only`), then redaction for a non-local
    provider. Raises `TerminalError`s (`no_route`, `local_only`, `redaction_failed`): then
    nothing may be sent."""
    local_only = mode == LlmMode.LOCAL_ONLY
    if routed:
        decision = decide_route(rt, RouteSpec(tier=ModelTier.FAST), request, local_only=local_only)
        route = Route(decision.provider, decision.model)
    elif local_only:
        route = local_route(rt, route)
    request = replace(request, model=route.model)
    redacted = redact_for(rt, route.provider, request)
    if redacted is None:
        return Gated(route, request)
    restore = redacted.restore if rt.settings.llm_privacy.restore else {}
    counts = redacted.counts or None
    return Gated(route, replace(request, messages=redacted.messages), restore, counts)


def wait_for_rate_limit(rt: Runtime, gated: Gated) -> None:
    """Take the call's request and tokens from the provider's shared limits, waiting as
    long as they ask (the caller's lease covers the wait: it renews before the call)."""
    while (decision := take_rate_limit(rt, gated.route, gated.request)).defer_s is not None:
        time.sleep(decision.defer_s)


def send(rt: Runtime, gated: Gated, reserve: Reserve) -> Completion:
    """Reserve, call, settle: the answer with the original values restored. A call that
    does not finish is settled at its reservation."""
    route, request = gated.route, gated.request
    admitted = reserve(route, request)
    label = rt.providers.metric_model(route.provider, route.model)
    with settling(rt, admitted) as bill, model_call(route, request, label=label) as call:
        completion = collect(rt.providers.get(route.provider).stream(request))
        bill.paid(completion)
        price = rt.providers.price(route.provider, route.model)
        call.answered(completion, price.cost(completion.input_tokens, completion.output_tokens))
    record_output_tokens(rt, route, completion.output_tokens)
    return restored(completion, gated.restore)


def restored(completion: Completion, mapping: dict[str, str]) -> Completion:
    """The answer's text and tool call arguments with the placeholders put back."""
    if not mapping:
        return completion
    calls = [
        ToolCall(c.id, c.name, restore_value(c.arguments, mapping)) for c in completion.tool_calls
    ]
    return replace(completion, text=restore_text(completion.text, mapping), tool_calls=calls)


@dataclass(frozen=True, slots=True)
class GatedInput:
    """What an agent (a `python` handler, an `a2a` service) receives, and how its answer is
    restored."""

    value: JsonObject
    restore: dict[str, str] = field(default_factory=dict, repr=False)


def guard_handler_input(rt: Runtime, value: JsonObject) -> GatedInput:
    """An agent's input, redacted as for a non-local provider whatever the mode (a handler
    may pass it on: to a provider of its own, a log, a service). Raises `RedactionFailed`
    (`redaction_failed`): then the agent must not run."""
    policy = privacy_policy(rt)
    if not policy.active:
        return GatedInput(value)
    redacted = redact_value(value, policy)
    restore = redacted.restore if rt.settings.llm_privacy.restore else {}
    return GatedInput(dict(redacted.value), restore)


def restored_answer(answer: Any, gated: GatedInput) -> Any:
    """A handler's answer (text or JSON) with the placeholders of its input put back."""
    return restore_value(answer, gated.restore) if gated.restore else answer


def check_remote_agent(name: str, url: str, *, mode: LlmMode) -> None:
    """Mode `local-only`: an A2A agent is called only at a loopback or private address, as a
    provider is; else `TerminalError` `local_only` (nothing is sent). The address itself is
    the operator's to know: not in the message."""
    if mode == LlmMode.LOCAL_ONLY and not private_address(url):
        raise TerminalError(
            f"the agent {name!r} is not local and mode local-only is in force",
            code=LOCAL_ONLY_CODE,
        )
