"""Proposal executors: what happens when an operator confirms a proposed action.

An executor is `fn(proposal: dict) -> dict` named by the setting `proposal_executor`
(`module:function`); the proposal carries its `tenant_id`. Its `action`, `product` and `params`
come from model output: treat them as untrusted (quote them in logs, validate before acting).
It runs once per confirmed proposal, on a `tools` worker; what it returns is recorded on the
proposal; an exception marks it `execution_failed` with the message.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def record_only(proposal: dict[str, Any]) -> dict[str, Any]:
    """The default: execute nothing; record that the operator confirmed it."""
    log.info(  # action and product come from model output: quoted, so no line can be forged
        "proposal %s of tenant %s confirmed: %r on %r (recorded only; no executor configured)",
        proposal["id"],
        proposal.get("tenant_id"),
        proposal["action"],
        proposal["product"],
    )
    return {"executed": False, "note": "recorded only: no executor is configured"}
