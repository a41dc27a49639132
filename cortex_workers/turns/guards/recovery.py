"""Anomaly detection on a model step's answer, and the recovery policy that follows.

Detectors (thresholds in `[recovery.thresholds]`): `short_output`, `cost_overrun`,
`latency_spike`, `depth_exceeded`. The strongest configured action wins: `escalate` (end the
turn `failed` with the anomaly as its error), `rollback` (restore the last checkpoint and end
the turn `rolled_back`), `fallback` (the step again on the next route of its chain), `retry`
(the step again on the same route: at most once per step and three times per turn, else
`escalate`), `continue` (record only). See docs/checkpoints.md.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...messages import Completion, ErrorDoc, JsonObject
from ...providers.registry import Route
from ...runtime import Runtime
from ...store.steps import Claim
from ...vocabulary import AnomalyKind, RecoveryAction
from ..context import ModelContext
from ..outcome import Fail, Outcome, Retry, Rollback
from ..step_record import StepRecord
from .anomalies import detected, recovered

log = logging.getLogger(__name__)

RETRIES_PER_STEP = 1
RETRIES_PER_TURN = 3
LATENCY_MIN_SAMPLES = 5
"""A model's p95 is trusted from this many earlier calls."""

_STRENGTH = list(RecoveryAction)  # continue < retry < fallback < rollback < escalate


@dataclass(frozen=True, slots=True)
class Finding:
    kind: AnomalyKind
    data: JsonObject = field(default_factory=dict)
    """The anomaly's facts, as the timeline records them."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What the step got back, as the detectors see it."""

    route: Route
    completion: Completion
    latency_ms: int
    reserved_micros: int | None
    cost_micros: int | None


def findings(rt: Runtime, answer: Answer, *, depth_exceeded: bool) -> list[Finding]:
    """What the detectors see in one answer."""
    t = rt.settings.recovery.thresholds
    out: list[Finding] = []
    done = answer.completion
    if depth_exceeded:
        return [Finding(AnomalyKind.DEPTH_EXCEEDED, {"max_depth": rt.settings.max_depth})]
    if not done.tool_calls and len(done.text.strip()) < t.short_output:
        out.append(Finding(AnomalyKind.SHORT_OUTPUT, {"chars": len(done.text.strip())}))
    cost, reserved = answer.cost_micros, answer.reserved_micros
    if reserved and cost is not None and cost > t.cost_overrun * reserved:
        data: JsonObject = {"cost_usd": cost / 1e6, "estimate_usd": reserved / 1e6}
        out.append(Finding(AnomalyKind.COST_OVERRUN, data))
    spike = _latency_spike(rt, answer)
    if spike is not None:
        out.append(spike)
    return out


def _latency_spike(rt: Runtime, answer: Answer) -> Finding | None:
    t = rt.settings.recovery.thresholds
    if answer.latency_ms < t.latency_min_ms:
        return None
    stats = rt.latency.stats(answer.route.provider, answer.route.model)
    if stats is None or stats.samples < LATENCY_MIN_SAMPLES:
        return None
    if answer.latency_ms <= t.latency_spike * stats.p95_ms:
        return None
    data: JsonObject = {
        "latency_ms": answer.latency_ms,
        "p95_ms": stats.p95_ms,
        "provider": answer.route.provider,
        "model": answer.route.model,
    }
    return Finding(AnomalyKind.LATENCY_SPIKE, data)


def respond(
    rt: Runtime,
    claim: Claim,
    ctx: ModelContext,
    record: StepRecord,
    found: Sequence[Finding],
    *,
    retried: tuple[int, ...] | None,
) -> Outcome | None:
    """Record each finding and take the strongest configured action; None: go on (store the
    answer), else how the step ends. `retried`: the steps of the turn a `retry` ran again
    (read with the claim when that action is configured)."""
    if not found:
        return None
    actions = [(detected(rt, record, f.kind, f.data), f) for f in found]
    action, finding = max(actions, key=lambda a: _STRENGTH.index(a[0]))
    if action == RecoveryAction.RETRY:
        return _retry(rt, claim, record, finding, retried or ())
    if action == RecoveryAction.FALLBACK:
        return _fallback(rt, claim, ctx, record, finding)
    if action == RecoveryAction.ROLLBACK:
        recovered(record, RecoveryAction.ROLLBACK, {"anomaly": finding.kind})
        why = f"{_describe(finding)}; the session is back at its last checkpoint"
        return Rollback(_error(finding, why))
    if action == RecoveryAction.ESCALATE:
        return escalate(claim, record, finding)
    return None


def _error(finding: Finding, what: str) -> ErrorDoc:
    return {"code": str(finding.kind), "message": f"anomaly {finding.kind}: {what}"}


def _retry(
    rt: Runtime, claim: Claim, record: StepRecord, finding: Finding, done: tuple[int, ...]
) -> Outcome:
    """The step again on the same route, within the allowance; past it, `escalate`."""
    if (
        done.count(claim.step_no) >= RETRIES_PER_STEP
        or len(done) >= RETRIES_PER_TURN
        or claim.attempt >= rt.settings.max_attempts
    ):
        return escalate(claim, record, finding, after="the retry allowance is used up")
    return _release(record, finding, RecoveryAction.RETRY, next_attempt=claim.attempt + 1)


def _fallback(
    rt: Runtime, claim: Claim, ctx: ModelContext, record: StepRecord, finding: Finding
) -> Outcome | None:
    """The step again on the next route of its chain; none left: go on with the answer."""
    routes = rt.providers.routes(ctx.provider, ctx.model)
    per = rt.settings.llm_attempts_per_provider
    index = (claim.attempt - 1) // per
    next_attempt = (index + 1) * per + 1
    if index + 1 >= len(routes) or next_attempt > rt.settings.max_attempts:
        log.warning(
            "turn %s: no further route to fall back to after %s", claim.turn_id, finding.kind
        )
        return None
    nxt = routes[index + 1]
    to = {"to": f"{nxt.provider}:{nxt.model}"}
    return _release(record, finding, RecoveryAction.FALLBACK, next_attempt=next_attempt, **to)


def _release(
    record: StepRecord,
    finding: Finding,
    action: RecoveryAction,
    *,
    next_attempt: int,
    **extra: str,
) -> Outcome:
    recovered(record, action, {"anomaly": finding.kind, **extra})
    return Retry(0.0, _error(finding, f"the step runs again ({action})"), next_attempt)


def escalate(claim: Claim, record: StepRecord, finding: Finding, *, after: str = "") -> Fail:
    """End the turn `failed` with the anomaly as its error, and alert (an ERROR log line and
    `cortex_recoveries_total{action="escalate"}`)."""
    why = after or "escalated"
    data = {"anomaly": finding.kind, **({"reason": after} if after else {})}
    recovered(record, RecoveryAction.ESCALATE, data)
    log.error(
        "turn %s failed on anomaly %s (%s): %s", claim.turn_id, finding.kind, why, finding.data
    )
    error = _error(finding, f"{_describe(finding)}; {why}")
    return Fail(error["code"], error["message"])


def _describe(finding: Finding) -> str:
    return ", ".join(f"{k}={v}" for k, v in finding.data.items()) or str(finding.kind)
