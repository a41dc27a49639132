"""Accepting jobs and batches: checked, stored queued in one transaction, then published."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from ..errors import InvalidRequest
from ..runtime import Runtime
from ..store import jobs as store
from ..store.db import transaction
from ..store.jobs import JobSpec
from .jobs import schema_problem
from .sessions import SessionSpec, check_provider


def check_spec(rt: Runtime, spec: JobSpec) -> None:
    """422 for a schema that is not a JSON Schema, or a provider that cannot run the job."""
    problem = schema_problem(spec.result_schema)
    if problem is not None:
        raise InvalidRequest(
            f"result_schema is not a valid JSON Schema: {problem}",
            code="invalid_result_schema",
            details={"problem": problem},
        )
    check_provider(rt, SessionSpec(provider=spec.provider, model=spec.model))


def submit_job(rt: Runtime, tenant_id: uuid.UUID, spec: JobSpec) -> uuid.UUID:
    """Store a queued job (the caller publishes it)."""
    check_spec(rt, spec)
    with transaction(rt.db) as db:
        return store.create_job(db, tenant_id, spec)


def submit_batch(
    rt: Runtime, tenant_id: uuid.UUID, spec: JobSpec, inputs: Sequence[Any]
) -> tuple[uuid.UUID, list[uuid.UUID]]:
    """Store a batch with one queued job per input (the caller publishes them)."""
    check_spec(rt, spec)
    with transaction(rt.db) as db:
        return store.create_batch(db, tenant_id, spec, inputs)
