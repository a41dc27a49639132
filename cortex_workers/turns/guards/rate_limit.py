"""The shared rate limits a provider call must respect (`[llm.rate_limits]`): one request and
its estimated input tokens are taken before the call, its output tokens counted after it."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ...budget.estimate import IMAGE_TOKENS, image_count
from ...messages import ModelRequest
from ...providers.limits import Limit
from ...providers.registry import Route
from ...runtime import Runtime
from ...vocabulary import RateLimitKind


def estimate_input_tokens(request: ModelRequest) -> int:
    """A cheap upper-ish estimate (4 characters a token) for token-rate limits."""
    chars = sum(len(m.content) for m in request.messages)
    chars += sum(len(t.description) + len(str(t.parameters)) for t in request.tools)
    return chars // 4 + 16 + IMAGE_TOKENS * image_count(request)


@dataclass(frozen=True, slots=True)
class RateDecision:
    """Proceed now, or come back in `defer_s` seconds (without burning an attempt)."""

    defer_s: float | None
    scope: str = ""
    """When deferred: the kinds of the limits in force (`rpm`, `tpm`, `rpm+tpm`)."""


def _limits(rt: Runtime, route: Route, tokens: int) -> list[Limit]:
    out = []
    for scope in (route.provider, f"{route.provider}:{route.model}"):
        config = rt.settings.llm_rate_limits.get(scope)
        if config is None:
            continue
        if config.rpm:
            out.append(Limit(scope, RateLimitKind.RPM, config.rpm, 1))
        if config.tpm:
            out.append(Limit(scope, RateLimitKind.TPM, config.tpm, min(tokens, config.tpm)))
    return out


def take_rate_limit(rt: Runtime, route: Route, request: ModelRequest) -> RateDecision:
    """Take one request and the estimated input tokens from the route's shared limits.

    A short wait (up to `llm_rate_wait_max_s`) is slept here; a longer one defers the step.
    """
    limits = _limits(rt, route, estimate_input_tokens(request))
    if not limits:
        return RateDecision(None)
    deadline = time.monotonic() + rt.settings.llm_rate_wait_max_s
    while True:
        grant = rt.rate_limiter.acquire(limits)
        if grant.granted:
            return RateDecision(None)
        if time.monotonic() + grant.wait_s > deadline:
            scope = "+".join(sorted({limit.kind for limit in limits}))
            return RateDecision(max(grant.wait_s, 0.05), scope)
        time.sleep(grant.wait_s)


def record_output_tokens(rt: Runtime, route: Route, output_tokens: int) -> None:
    """Output tokens are known only afterwards: count them against token-rate limits."""
    for scope in (route.provider, f"{route.provider}:{route.model}"):
        config = rt.settings.llm_rate_limits.get(scope)
        if config is not None and config.tpm:
            rt.rate_limiter.record(scope, RateLimitKind.TPM, output_tokens)
