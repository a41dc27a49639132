"""The parameters of a step's closing statement (`store.step_commit`), and the value read
from the row it returns."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from psycopg.types.json import Jsonb

from .repo import storable_json, storable_text
from .sql import Params
from .step_record_rows import (
    RecordRows,
    audits_param,
    error_param,
    events_param,
    moves_param,
    spends_param,
    warnings_param,
)

if TYPE_CHECKING:
    from .step_commit import Reply, StepKey, ToolDone


def record_params(step: StepKey, record: RecordRows, alert_pct: float) -> Params:
    params: Params = {
        "session": step.session_id,
        "turn": step.turn_id,
        "step": step.step_id,
        "attempt": step.attempt,
        "tenant": step.tenant_id,
        "user": step.user,
    }
    if record.events:
        params["events"] = events_param(record.events)
    if record.audits:
        params["audits"] = audits_param(record.audits)
    if record.spends:
        params["spends"] = spends_param(record.spends)
        params["moves"] = moves_param(record.spends)
        if any(s.held for s in record.spends):
            params["alert_pct"] = alert_pct
    if record.warnings:
        params["warnings"] = warnings_param(record.warnings)
    if record.route is not None or record.redactions is not None:
        params["route"] = None if record.route is None else Jsonb(dict(record.route))
        params["redactions"] = None if record.redactions is None else Jsonb(dict(record.redactions))
    return params


def reply_params(reply: Reply) -> Params:
    u, m = reply.usage, reply.message
    params: Params = {
        "add_input": u.input_tokens,
        "add_output": u.output_tokens,
        "add_cost": u.cost_usd,
        "add_model_steps": reply.model_steps,
        "provider": u.provider,
        "model": u.model,
        "fallback_from": u.fallback_from,
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cache_read_tokens": u.cache_read_tokens,
        "cache_write_tokens": u.cache_write_tokens,
        "cost_usd": u.cost_usd,
        "latency_ms": u.latency_ms,
        "message_id": m.id,
        "content": m.content,
        "message_calls": None if m.tool_calls is None else Jsonb(m.tool_calls),
    }
    if (a := reply.audit) is not None:
        params.update(
            call_name=a.name, call_input=Jsonb(dict(a.input)), call_output=Jsonb(dict(a.output))
        )
    if reply.end is not None:
        params.update(
            status=reply.end.value,
            answer=reply.answer,
            error=error_param(reply.error),
            summarize_step_id=uuid.uuid4(),
            summarize=reply.summarize_window is not None,
            window=reply.summarize_window or 0,
        )
    if reply.calls:
        params["calls"] = Jsonb(
            [
                {
                    "id": str(c.tool_call_id),
                    "step_id": str(c.step_id),
                    "step_no": c.step_no,
                    "call_id": storable_text(c.call_id),
                    "name": storable_text(c.name),
                    "arguments": storable_json(dict(c.arguments)),
                }
                for c in reply.calls
            ]
        )
    return params


def tool_params(done: ToolDone) -> Params:
    params: Params = {
        "next_step_id": uuid.uuid4(),
        "tool_call_id": done.tool_call_id,
        "call_id": done.call_id,
        "name": done.name,
        "content": storable_text(done.content),
        "is_error": done.is_error,
        "truncated": done.truncated,
        "severity": done.severity.value,
        "error_kind": done.error_kind,
        "latency_ms": done.latency_ms,
        "message_id": uuid.uuid4(),
        "images": Jsonb(list(done.images)) if done.images else None,
        "audit_input": Jsonb(storable_json(dict(done.audit_input))),
        "audit_output": Jsonb(storable_json(dict(done.audit_output))),
    }
    if (p := done.proposal) is not None:
        params.update(
            proposal_id=p.id,
            proposal_ttl_s=p.ttl_s,
            action=storable_text(p.action),
            product=storable_text(p.product),
            params=Jsonb(storable_json(dict(p.params))),
            rationale=storable_text(p.rationale),
            blast_radius=None if p.blast_radius is None else storable_text(p.blast_radius),
            reversible=p.reversible,
        )
    return params
