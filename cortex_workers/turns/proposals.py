"""Proposals after they are made: confirm, reject, expire, execute; each change is an event
on the session's notice stream."""

from __future__ import annotations

import importlib
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import cast

from pydantic import JsonValue

from ..errors import ConflictError, NotFound
from ..messages import event_data
from ..runtime import Runtime, get_runtime
from ..store import proposals
from ..store.db import transaction
from ..store.models import Proposal
from ..streaming import emit_session_notice
from ..tools.idempotency import proposal_key
from ..vocabulary import ProposalStatus
from .events import proposal_changed

CONFIRMED = frozenset(
    {
        ProposalStatus.CONFIRMED,
        ProposalStatus.EXECUTING,
        ProposalStatus.EXECUTED,
        ProposalStatus.EXECUTION_FAILED,
    }
)
"""A proposal in any of these was confirmed."""

log = logging.getLogger(__name__)


def _notify(rt: Runtime, rows: list[Proposal]) -> None:
    for row in rows:
        emit_session_notice(
            rt.redis,
            row.session_id,
            event=proposal_changed(row),
            ttl_s=rt.settings.stream_ttl_s,
        )


def decide(
    rt: Runtime, *, tenant_id: uuid.UUID, proposal_id: uuid.UUID, status: ProposalStatus
) -> tuple[Proposal, bool]:
    """Confirm or reject a pending proposal; returns it and whether to start its execution.

    Repeating the same decision answers the same proposal and does nothing more; a different
    decision on a decided (or expired) proposal is a conflict.
    """
    with transaction(rt.db) as db:
        if proposals.get(db, proposal_id, tenant_id=tenant_id) is None:
            raise NotFound(f"proposal {proposal_id} not found")
        changed = proposals.decide(db, proposal_id, status=status)
    if changed is not None:
        _notify(rt, [changed])
        return changed, status == ProposalStatus.CONFIRMED
    expire_due(rt)  # it may be past its time and not swept yet: record that first
    with transaction(rt.db) as db:
        current = proposals.get(db, proposal_id, tenant_id=tenant_id)
    assert current is not None
    if current.status == status or (
        status == ProposalStatus.CONFIRMED and current.status in CONFIRMED
    ):
        return current, False
    raise ConflictError(
        f"proposal {proposal_id} is {current.status}; it can no longer be {status}",
        code="proposal_decided",
        details={"status": current.status},
    )


def expire_due(rt: Runtime) -> int:
    """Expire unanswered proposals, and fail executions whose worker died."""
    with transaction(rt.db) as db:
        changed = list(proposals.expire_due(db))
        changed += proposals.fail_lost_executions(
            db, older_than_s=rt.settings.proposal_execution_timeout_s
        )
    _notify(rt, changed)
    return len(changed)


Executor = Callable[[dict[str, object]], Mapping[str, JsonValue]]
"""`fn(proposal) -> outcome`: see `executors.py`."""


def _executor(rt: Runtime) -> Executor:
    module, _, name = rt.settings.proposal_executor.partition(":")
    return cast(Executor, getattr(importlib.import_module(module), name))


def _run_executor(rt: Runtime, data: dict[str, object]) -> Mapping[str, JsonValue]:
    """An MCP call that awaited confirmation is sent now; any other proposal goes to the
    configured executor."""
    action = str(data["action"])
    if action.startswith("mcp:") and rt.mcp is not None:
        params = data.get("params")
        result = rt.mcp.execute(
            action, params if isinstance(params, dict) else {}, key=str(data["idempotency_key"])
        )
        return {"executed": True, "result": result}
    return _executor(rt)(data)


def execute(proposal_id: uuid.UUID) -> None:
    """Hand a confirmed proposal to the executor hook, exactly once."""
    rt = get_runtime()
    with transaction(rt.db) as db:
        row = proposals.claim_execution(db, proposal_id)
        if row is None:
            return
        data = event_data(proposal_changed(row))  # the executor's argument: the event's data
        data["idempotency_key"] = proposal_key(row.id)
        data["tenant_id"] = str(row.tenant_id)  # which tenant's proposal the executor acts on
    try:
        outcome, ok = dict(_run_executor(rt, data)), True
    except Exception as exc:  # the operator's hook failed: recorded, visible
        log.exception("proposal executor failed for %s", proposal_id)
        outcome, ok = {"error": f"{type(exc).__name__}: {exc}"}, False
    with transaction(rt.db) as db:
        done = proposals.record_execution(db, proposal_id, ok=ok, outcome=outcome)
    if done is not None:
        _notify(rt, [done])
