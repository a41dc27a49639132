"""Proposal executors: what happens when an operator confirms a proposed action.

An executor is `fn(proposal: dict) -> dict` named by the setting `proposal_executor`
(`module:function`); the proposal carries its `tenant_id`. Its `action`, `product` and `params`
come from model output: treat them as untrusted (quote them in logs, validate before acting).
It runs at most once per confirmed proposal, on a `tools` worker (a worker that dies while
running it leaves the proposal `execution_failed`, never re-run); what it returns is recorded
on the proposal; an exception marks it `execution_failed` with the message.
`proposal["idempotency_key"]` is the same for every attempt at the proposal: pass it on to the
system that acts, so it can recognise a repeat.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from .messages import JsonObject

log = logging.getLogger(__name__)


def record_only(proposal: Mapping[str, object]) -> JsonObject:
    """The default: execute nothing; record that the operator confirmed it."""
    log.info(  # action and product come from model output: quoted, so no line can be forged
        "proposal %s of tenant %s confirmed: %r on %r (recorded only; no executor configured)",
        proposal["id"],
        proposal.get("tenant_id"),
        proposal["action"],
        proposal["product"],
    )
    return {"executed": False, "note": "recorded only: no executor is configured"}
