"""`context_degradation`: a new rolling summary much shorter than the one it replaces. The
anomaly is recorded on the turn whose summarize step it is; any action but `continue` keeps
the previous summary (the next turn folds again). See docs/checkpoints.md."""

from __future__ import annotations

from ..runtime import Runtime
from ..store import steps as step_store
from ..store.db import transaction
from ..store.steps import Claim
from ..vocabulary import AnomalyKind, RecoveryAction, StepKind
from .anomalies import detected, recovered
from .observe import StepOutcome, count_step


def kept_previous(rt: Runtime, claim: Claim, previous: str | None, summary: str) -> bool:
    """True when the new summary must not replace `previous`: the anomaly is recorded and
    the summarize step finished without storing it."""
    ratio = rt.settings.recovery.thresholds.context_degradation
    if not previous or len(summary) >= ratio * len(previous):
        return False
    data = {"previous_chars": len(previous), "summary_chars": len(summary)}
    action = detected(rt, claim.turn_id, AnomalyKind.CONTEXT_DEGRADATION, data, step=claim.step_no)
    if action == RecoveryAction.CONTINUE:
        return False
    _keep_previous(rt, claim)
    recovered(
        rt,
        claim.turn_id,
        action,
        {"anomaly": AnomalyKind.CONTEXT_DEGRADATION, "kept": "previous summary"},
        step=claim.step_no,
    )
    return True


def _keep_previous(rt: Runtime, claim: Claim) -> None:
    """Finish the summarize step without storing its summary."""
    with transaction(rt.db) as db:
        step_store.finish_step(db, claim.step_id, claim.attempt)
    count_step(StepKind.SUMMARIZE, StepOutcome.DONE)
