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
    turn_id: uuid.UUID | None = None
    """The step's turn, when at hand: shown with the task in Flower, never sent to the worker."""
    session_id: uuid.UUID | None = None
    """The turn's session, when at hand: shown like `turn_id`."""


def step_ref(
    step_id: uuid.UUID | None,
    kind: StepKind,
    *,
    turn_id: uuid.UUID | None = None,
    session_id: uuid.UUID | None = None,
) -> list[NextStep]:
    """Zero or one `NextStep`: a None id means the step existed already (nothing to publish)."""
    if step_id is None:
        return []
    return [NextStep(step_id, kind, turn_id=turn_id, session_id=session_id)]


@dataclass(frozen=True, slots=True)
class AgentTaskRef:
    """An agent task committed to Postgres that now needs a run on the `agents` queue."""

    id: uuid.UUID
    session_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class TaskPollRef:
    """A parked tool call (`store.parked_calls`) whose MCP task needs a look on the `tools`
    queue in `countdown` seconds."""

    id: uuid.UUID
    countdown: float = 0.0


Publish = NextStep | AgentTaskRef | TaskPollRef
"""What the dispatcher sends after a commit: steps, agent tasks, and polls of parked calls."""
