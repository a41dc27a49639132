"""The step record: what a step learns while it runs (timeline events, warnings, audit rows of
calls that did not answer, the spend of each provider call, its route), appended in memory and
written by the statement that ends the step (`store.step_commit`), never where it is learned.

Timeline rows therefore become visible when their step ends; the live view of a running step
is its event stream (docs/checkpoints.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..store.step_record_rows import AuditRow, RecordRows, Spend, TimelineRow, Warning
from ..vocabulary import TimelineKind


@dataclass
class StepRecord:
    """A step's record (see the module's doc), for the step numbered `step_no`."""

    step_no: int
    events: list[TimelineRow] = field(default_factory=list)
    warnings: list[Warning] = field(default_factory=list)
    audits: list[AuditRow] = field(default_factory=list)
    spends: list[Spend] = field(default_factory=list)
    route: Mapping[str, Any] | None = None
    redactions: Mapping[str, int] | None = None

    def note(
        self,
        kind: TimelineKind,
        data: Mapping[str, Any],
        *,
        step: int | None = -1,
        ending: bool = False,
    ) -> None:
        """A timeline event, now (`step`: another step's number, or None for the turn's;
        `ending`: written only if the step's ending is)."""
        at = datetime.now(UTC)
        self.events.append(
            TimelineRow(kind, dict(data), self.step_no if step == -1 else step, at, ending)
        )

    def warn(self, code: str, message: str) -> None:
        self.warnings.append(Warning(code, message, self.step_no))

    def audit(self, row: AuditRow) -> None:
        self.audits.append(row)

    def spent(self, spend: Spend) -> None:
        self.spends.append(spend)

    def routed(self, route: Mapping[str, Any] | None, redactions: Mapping[str, int] | None) -> None:
        """The attempt's route decision and redaction counts, set on the step."""
        self.route, self.redactions = route, redactions

    def rows(self) -> RecordRows:
        return RecordRows(
            events=tuple(self.events),
            audits=tuple(self.audits),
            spends=tuple(self.spends),
            warnings=tuple(self.warnings),
            route=self.route,
            redactions=self.redactions,
        )

    def ending_part(self) -> StepRecord:
        """What of the record is written only with the step's ending: its events, the
        warnings (on the turn) and the route (on the step). A statement that did not write the
        ending wrote the rest."""
        part = StepRecord(self.step_no, [e for e in self.events if e.ending])
        part.warnings = self.warnings
        part.route, part.redactions = self.route, self.redactions
        return part
