"""Budget alerts that fired as a call was settled: a WARNING line and
`cortex_budget_alerts_total` each (their `budget.alert` webhook event is recorded by the
statement that fired them)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ...observability.metrics import count_budget_alert
from ...store.budget import Alert

log = logging.getLogger(__name__)


def report_alerts(alerts: Iterable[Alert], pct: float | None = None) -> None:
    """The WARNING line and the metric of each alert that fired (once per scope and window)."""
    for alert in alerts:
        scope = alert.key.split(":", 1)[0]
        log.warning(
            "budget alert: %s spent $%.6f of its $%.2f daily limit%s",
            alert.key,
            alert.spent / 1e6,
            alert.limit / 1e6,
            f" (alert at {pct:g}%)" if pct is not None else "",
        )
        count_budget_alert(scope)
