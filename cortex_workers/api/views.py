"""Rows to response bodies (read in one transaction per request)."""

from __future__ import annotations

import uuid
from datetime import datetime
from pathlib import PurePath

from sqlalchemy.orm import Session as Db

from ..errors import NotFound
from ..runtime import Runtime
from ..store import proposals, repo, tool_calls
from ..store import steps as step_store
from ..store.models import Message, Proposal, Session, Step, Turn
from ..store.whiteboard import has_board
from ..vocabulary import TurnStatus
from .checkpoint_schemas import ForkedFrom
from .schemas import (
    ActiveTurn,
    MessageOut,
    MessagesPage,
    ProposalOut,
    SessionOut,
    StepOut,
    ToolCallOut,
    TurnOut,
    Usage,
)


def events_url(turn_id: uuid.UUID) -> str:
    return f"/v1/turns/{turn_id}/events"


def session_out(
    rt: Runtime, db: Db, session: Session, *, last_activity_at: datetime | None = None
) -> SessionOut:
    """The session as the API shows it; `last_activity_at` as read with it (see
    `repo.LAST_ACTIVITY_AT`), or None for a session just made (no turn yet: its creation)."""
    active = repo.active_turns(db, session.id)
    running = next((t for t in active if t.status == TurnStatus.RUNNING), None)
    provider, model = rt.providers.resolve(session.provider, session.model)
    return SessionOut(
        id=session.id,
        name=session.name,
        system_prompt=session.system_prompt,
        provider=provider,
        model=model,
        tools=session.tools,
        metadata=session.metadata_ or {},
        user=session.user,
        mode=session.mode,
        route=session.route,
        agents=list(session.agents or []),
        parent_session_id=session.parent_session_id,
        whiteboard=has_board(db, session.id),
        summary=session.summary,
        summary_upto_seq=session.summary_upto_seq,
        active_turn=ActiveTurn(id=running.id, seq=running.seq, status=running.status)
        if running
        else None,
        queued_turns=sum(1 for t in active if t.status == TurnStatus.QUEUED),
        usage=Usage(input_tokens=session.input_tokens, output_tokens=session.output_tokens),
        cost_usd=float(session.cost_usd),
        created_at=session.created_at,
        last_activity_at=last_activity_at or session.created_at,
        forked_from=_forked_from(session),
    )


def _forked_from(session: Session) -> ForkedFrom | None:
    if session.forked_from_session_id is None or session.forked_from_turn_id is None:
        return None
    return ForkedFrom(
        session_id=session.forked_from_session_id, turn_id=session.forked_from_turn_id
    )


def message_out(m: Message) -> MessageOut:
    return MessageOut(
        seq=m.seq,
        role=m.role,
        content=m.content,
        tool_calls=m.tool_calls,
        tool_call_id=m.tool_call_id,
        name=m.name,
        is_error=m.is_error,
        turn_id=m.turn_id,
        created_at=m.created_at,
        rolled_back=m.rolled_back,
        images=[str(url) for url in m.images] if m.images else None,
    )


def messages_page(
    db: Db, session: Session, *, after: int, limit: int, include_rolled_back: bool = False
) -> MessagesPage:
    """Up to `limit` of the session's messages after sequence number `after`, oldest first
    (rolled-back ones only when asked)."""
    rows = repo.list_messages(
        db, session.id, after=after, limit=limit + 1, include_rolled_back=include_rolled_back
    )
    page = [message_out(m) for m in rows[:limit]]
    return MessagesPage(messages=page, next_after=page[-1].seq if len(rows) > limit else None)


def _step_out(s: Step) -> StepOut:
    return StepOut(
        id=s.id,
        step_no=s.step_no,
        kind=s.kind,
        status=s.status,
        attempt=s.attempt,
        parent_step_id=s.parent_step_id,
        provider=s.provider,
        model=s.model,
        fallback_from=s.fallback_from,
        usage=Usage(
            input_tokens=s.input_tokens,
            output_tokens=s.output_tokens,
            cache_read_tokens=s.cache_read_tokens,
            cache_write_tokens=s.cache_write_tokens,
        ),
        cost_usd=float(s.cost_usd),
        latency_ms=s.latency_ms,
        error=s.error,
        route=s.route,
        redactions=s.redactions,
    )


def turn_out(db: Db, turn: Turn) -> TurnOut:
    steps = [_step_out(s) for s in step_store.steps_of_turn(db, turn.id)]
    calls = [
        ToolCallOut(
            id=c.call_id,
            name=c.name,
            arguments=c.arguments,
            status=c.status,
            is_error=c.is_error,
            truncated=c.truncated,
            severity=c.severity,
            error=c.error_kind,
            result=c.result,
            latency_ms=c.latency_ms,
        )
        for c in tool_calls.of_turn(db, turn.id)
    ]
    return TurnOut(
        id=turn.id,
        session_id=turn.session_id,
        seq=turn.seq,
        status=turn.status,
        content=turn.content,
        answer=turn.answer,
        error=turn.error,
        warnings=turn.warnings or [],
        usage=Usage(input_tokens=turn.input_tokens, output_tokens=turn.output_tokens),
        cost_usd=float(turn.cost_usd),
        steps=steps,
        tool_calls=calls,
        created_at=turn.created_at,
        started_at=turn.started_at,
        finished_at=turn.finished_at,
        events_url=events_url(turn.id),
        trigger=turn.trigger,
        trace_id=trace_id(turn.traceparent),
    )


def trace_id(traceparent: str | None) -> str | None:
    """The trace id of a stored W3C traceparent (`00-{trace id}-{span id}-{flags}`)."""
    if traceparent is None:
        return None
    parts = traceparent.split("-")
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else None


def require_session(db: Db, session_id: uuid.UUID, tenant_id: uuid.UUID) -> Session:
    session = repo.get_session(db, session_id, tenant_id=tenant_id)
    if session is None:
        raise NotFound(f"session {session_id} not found")
    return session


def require_session_with_activity(
    db: Db, session_id: uuid.UUID, tenant_id: uuid.UUID
) -> tuple[Session, datetime]:
    found = repo.session_with_activity(db, session_id, tenant_id=tenant_id)
    if found is None:
        raise NotFound(f"session {session_id} not found")
    return found


def require_turn(db: Db, turn_id: uuid.UUID, tenant_id: uuid.UUID) -> Turn:
    turn = repo.get_turn(db, turn_id, tenant_id=tenant_id)
    if turn is None:
        raise NotFound(f"turn {turn_id} not found")
    return turn


def require_proposal(db: Db, proposal_id: uuid.UUID, tenant_id: uuid.UUID) -> Proposal:
    row = proposals.get(db, proposal_id, tenant_id=tenant_id)
    if row is None:
        raise NotFound(f"proposal {proposal_id} not found")
    return row


def proposals_of_session(db: Db, session: Session) -> list[ProposalOut]:
    """Every action the model proposed in the session, oldest first."""
    return [proposal_out(p) for p in proposals.of_session(db, session.id)]


def proposal_out(p: Proposal) -> ProposalOut:
    return ProposalOut(
        id=p.id,
        session_id=p.session_id,
        turn_id=p.turn_id,
        action=p.action,
        product=p.product,
        params=p.params or {},
        rationale=p.rationale,
        blast_radius=p.blast_radius,
        reversible=p.reversible,
        status=p.status,
        created_at=p.created_at,
        expires_at=p.expires_at,
        decided_at=p.decided_at,
        executed_at=p.executed_at,
        outcome=p.outcome,
    )


def shown_source(source: str) -> str:
    """A rejected source (plugin manifest, agent card) as tenants see it: its file name,
    never the operator's directory layout."""
    kind, _, path = source.rpartition(" ")
    if "/" not in path and "\\" not in path:
        return source
    return f"{kind} {PurePath(path).name}".strip()


def for_tenants(text: str | None, base_url: str | None) -> str | None:
    """A provider's reason (unavailable, cooling down) without its address."""
    if text is None or not base_url:
        return text
    return text.replace(base_url, "its base_url")
