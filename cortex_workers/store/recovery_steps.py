"""Giving a model step back after an anomaly, for a retry or for the next route."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import func, update
from sqlalchemy.orm import Session as Db

from ..vocabulary import StepStatus
from .models import Step


def release_at(
    db: Db, step_id: uuid.UUID, attempt: int, *, next_attempt: int, error: dict[str, Any]
) -> bool:
    """Give the leased step back as pending, available now; its next claim is attempt
    `next_attempt` (which picks its route: see `ProviderRegistry.choose`)."""
    return (
        db.execute(
            update(Step)
            .where(Step.id == step_id, Step.attempt == attempt, Step.status == StepStatus.LEASED)
            .values(
                status=StepStatus.PENDING,
                attempt=next_attempt - 1,
                lease_until=None,
                error=error,
                available_at=func.now(),
                published_at=func.now(),
            )
            .returning(Step.id)
        ).first()
        is not None
    )
