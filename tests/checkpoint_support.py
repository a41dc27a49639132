"""What a turn's first model step saw (or would see): the model's context, rebuilt."""

from __future__ import annotations

from cortex_workers.messages import Message
from cortex_workers.runtime import get_runtime
from cortex_workers.store.models import Step
from cortex_workers.store.steps import Claim
from cortex_workers.turns.context import load_model_context

ENDED = ("done", "failed", "cancelled", "rolled_back")


def model_context(turn_id: str) -> tuple[Message, ...]:
    """The context of the turn's last model step, as `load_model_context` builds it."""
    rt = get_runtime()
    with rt.db() as db:
        step = (
            db.query(Step)
            .filter(Step.turn_id == turn_id, Step.kind == "model")
            .order_by(Step.step_no.desc())
            .first()
        )
        assert step is not None
        claim = Claim(
            step.id, step.turn_id, step.step_no, step.kind, 1, None, step.call_index, None
        )
        return load_model_context(rt, db, claim).messages


def contents(turn_id: str) -> str:
    """Every message of the context, joined: what the model could know."""
    return "\n".join(m.content for m in model_context(turn_id))
