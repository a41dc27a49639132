"""The events a turn's stored rows stand for (the SSE contract in docs/events.md)."""

from __future__ import annotations

from ..messages import ProposalChanged, ToolResultReady
from ..store.models import Proposal, ToolCallRow


def tool_result_of(row: ToolCallRow) -> ToolResultReady:
    """`tool_result` of a stored tool call."""
    return ToolResultReady(
        id=row.call_id,
        name=row.name,
        is_error=row.is_error,
        content=row.result or "",
        truncated=row.truncated,
        severity=row.severity,
        error=row.error_kind,
    )


def proposal_changed(p: Proposal) -> ProposalChanged:
    """`proposal`: an action awaiting (or past) an operator's decision."""
    return ProposalChanged(
        id=str(p.id),
        action=p.action,
        product=p.product,
        rationale=p.rationale,
        status=p.status,
        params=p.params,
        blast_radius=p.blast_radius,
        reversible=p.reversible,
        expires_at=p.expires_at.isoformat() if p.expires_at else None,
    )
