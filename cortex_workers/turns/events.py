"""The data of the events a turn's steps publish (the SSE contract in DESIGN.md)."""

from __future__ import annotations

from typing import Any

from ..store.models import Proposal, ToolCallRow


def tool_result_data(
    call_id: str,
    name: str,
    *,
    is_error: bool,
    content: str,
    truncated: bool,
    severity: str = "ok",
    error: str | None = None,
) -> dict[str, Any]:
    """`tool_result`: `severity` is how a UI colours it (ok, info=gray, warning=yellow,
    error=red); `error` names the failure kind when `is_error`."""
    return {
        "id": call_id,
        "name": name,
        "is_error": is_error,
        "content": content,
        "truncated": truncated,
        "severity": severity,
        "error": error,
    }


def tool_result_of(row: ToolCallRow) -> dict[str, Any]:
    return tool_result_data(
        row.call_id,
        row.name,
        is_error=row.is_error,
        content=row.result or "",
        truncated=row.truncated,
        severity=row.severity,
        error=row.error_kind,
    )


def proposal_data(p: Proposal) -> dict[str, Any]:
    """`proposal`: an action awaiting (or past) an operator's decision."""
    return {
        "id": str(p.id),
        "action": p.action,
        "product": p.product,
        "rationale": p.rationale,
        "status": p.status,
        "params": p.params,
        "blast_radius": p.blast_radius,
        "reversible": p.reversible,
        "expires_at": p.expires_at.isoformat() if p.expires_at else None,
    }
