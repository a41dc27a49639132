"""Proposed actions: list, read, confirm, reject. Only an operator's confirm executes one."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter

from ...dispatch import publish_execution
from ...runtime import Runtime
from ...store.db import transaction
from ...turns.proposals import decide
from ...vocabulary import ProposalStatus
from ..deps import Caller, CallerDep, RuntimeDep
from ..schemas import ProposalOut
from ..views import proposal_out, proposals_of_session, require_proposal, require_session

router = APIRouter(tags=["proposals"])
DECIDED: dict[int | str, dict[str, Any]] = {
    403: {"description": "a session token of scope `read`"},
    409: {"description": "the proposal was already decided otherwise, or expired"},
}


@router.get("/v1/sessions/{session_id}/proposals", response_model=list[ProposalOut])
def list_proposals(session_id: uuid.UUID, rt: RuntimeDep, caller: CallerDep) -> list[ProposalOut]:
    """Every action the model proposed in this session, oldest first, with its status."""
    caller.require_read(session_id, f"session {session_id}")
    with transaction(rt.db) as db:
        return proposals_of_session(db, require_session(db, session_id, caller.tenant_id))


@router.get("/v1/proposals/{proposal_id}", response_model=ProposalOut)
def get_proposal(proposal_id: uuid.UUID, rt: RuntimeDep, caller: CallerDep) -> ProposalOut:
    with transaction(rt.db) as db:
        row = require_proposal(db, proposal_id, caller.tenant_id)
        caller.require_read(row.session_id, f"proposal {proposal_id}")
        return proposal_out(row)


def _require_chat(rt: Runtime, caller: Caller, proposal_id: uuid.UUID) -> None:
    with transaction(rt.db) as db:
        row = require_proposal(db, proposal_id, caller.tenant_id)
    caller.require_chat(row.session_id, f"proposal {proposal_id}")


@router.post("/v1/proposals/{proposal_id}/confirm", response_model=ProposalOut, responses=DECIDED)
def confirm(proposal_id: uuid.UUID, rt: RuntimeDep, caller: CallerDep) -> ProposalOut:
    """Confirm a pending proposal: it is handed to the configured executor, once. Confirming
    it again answers the same proposal and does nothing more."""
    _require_chat(rt, caller, proposal_id)
    row, execute = decide(
        rt, tenant_id=caller.tenant_id, proposal_id=proposal_id, status=ProposalStatus.CONFIRMED
    )
    if execute:
        publish_execution(row.id)
    return proposal_out(row)


@router.post("/v1/proposals/{proposal_id}/reject", response_model=ProposalOut, responses=DECIDED)
def reject(proposal_id: uuid.UUID, rt: RuntimeDep, caller: CallerDep) -> ProposalOut:
    """Reject a pending proposal; nothing is executed. Rejecting it again changes nothing."""
    _require_chat(rt, caller, proposal_id)
    row, _ = decide(
        rt, tenant_id=caller.tenant_id, proposal_id=proposal_id, status=ProposalStatus.REJECTED
    )
    return proposal_out(row)
