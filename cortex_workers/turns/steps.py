"""What a step hands back to the dispatcher: the next steps to publish, as values."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..vocabulary import StepKind


@dataclass(frozen=True, slots=True)
class NextStep:
    """A step committed to Postgres that now needs a delivery on its queue."""

    id: uuid.UUID
    kind: StepKind
    countdown: float = 0.0
    """Seconds to wait before delivery (a retry's backoff)."""


def step_ref(step_id: uuid.UUID | None, kind: StepKind) -> list[NextStep]:
    """Zero or one `NextStep`: a None id means the step existed already (nothing to publish)."""
    return [] if step_id is None else [NextStep(step_id, kind)]
