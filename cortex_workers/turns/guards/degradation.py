"""`context_degradation`: a new rolling summary much shorter than the one it replaces. The
anomaly is recorded on the turn whose summarize step it is; any action but `continue` keeps
the previous summary (the next turn folds again). See docs/checkpoints.md."""

from __future__ import annotations

from ...runtime import Runtime
from ...vocabulary import AnomalyKind, RecoveryAction
from ..step_record import StepRecord
from .anomalies import detected, recovered


def kept_previous(rt: Runtime, record: StepRecord, previous: str | None, summary: str) -> bool:
    """True when the new summary must not replace `previous` (the caller finishes the step
    without storing it); the anomaly, and the action taken, go into the step's record."""
    ratio = rt.settings.recovery.thresholds.context_degradation
    if not previous or len(summary) >= ratio * len(previous):
        return False
    data = {"previous_chars": len(previous), "summary_chars": len(summary)}
    action = detected(rt, record, AnomalyKind.CONTEXT_DEGRADATION, data)
    if action == RecoveryAction.CONTINUE:
        return False
    kept = {"anomaly": AnomalyKind.CONTEXT_DEGRADATION, "kept": "previous summary"}
    recovered(record, action, kept)
    return True
