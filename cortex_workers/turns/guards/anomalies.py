"""Anomalies of a turn and the recovery that follows: each detection is recorded in the
timeline and in `cortex_anomalies_total{kind}`, each action taken in the timeline and in
`cortex_recoveries_total{action}`. The action of a kind is `[recovery].actions` (default
`continue`: record only). See docs/checkpoints.md."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ...observability.metrics import count_anomaly, count_recovery
from ...runtime import Runtime
from ...vocabulary import AnomalyKind, RecoveryAction, TimelineKind
from ..step_record import StepRecord

log = logging.getLogger(__name__)


def action_of(rt: Runtime, kind: AnomalyKind) -> RecoveryAction:
    """`[recovery].actions` for `kind` (`continue` when not configured)."""
    actions = rt.settings.recovery.actions.items()
    return RecoveryAction(next((a for k, a in actions if k == kind), RecoveryAction.CONTINUE))


def detected(
    rt: Runtime, record: StepRecord, kind: AnomalyKind, data: Mapping[str, Any]
) -> RecoveryAction:
    """Record an anomaly in the step's record; returns the action configured for its kind."""
    action = action_of(rt, kind)
    count_anomaly(kind)
    log.warning("anomaly %s (%s), action %s", kind, dict(data), action)
    record.note(TimelineKind.ANOMALY, {"kind": kind, "action": action, **data})
    return action


def recovered(record: StepRecord, action: RecoveryAction, data: Mapping[str, Any]) -> None:
    """Record a recovery action taken (`continue` is not an action taken: not recorded)."""
    if action == RecoveryAction.CONTINUE:
        return
    count_recovery(action)
    record.note(TimelineKind.RECOVERY, {"action": action, **data})
