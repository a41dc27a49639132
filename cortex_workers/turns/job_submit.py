"""Accepting jobs and batches: checked (their schema, their provider, the daily budgets),
stored queued in one transaction, then published."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session as Db

from ..errors import InvalidRequest
from ..providers.registry import Route
from ..runtime import Runtime
from ..store import jobs as store
from ..store.db import transaction
from ..store.job_tables import Job
from ..store.jobs import JobSpec
from ..store.models import Tenant
from .guards.modes import check_session_mode, mode_in_force
from .job_spend import check_job_budget, estimate
from .jobs import build_request, schema_problem, text_of
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


def check_budget(rt: Runtime, tenant_id: uuid.UUID, spec: JobSpec, inputs: Sequence[Any]) -> None:
    """`BudgetExhausted` (402) when not even the smallest first call among `inputs` fits what
    is left of the global or the tenant's daily budget."""
    smallest = min(inputs, key=lambda value: len(text_of(value).encode()))
    provider, model = rt.providers.resolve(spec.provider, spec.model)
    route = Route(provider, model)
    job = Job(
        instructions=spec.instructions,
        input=smallest,
        result_schema=spec.result_schema,
        metadata_=spec.metadata,
        attempts=[],
    )
    check_job_budget(rt, tenant_id, estimate(rt, route, build_request(rt, job, route, n=1)))


def check_mode(rt: Runtime, db: Db, tenant_id: uuid.UUID, spec: JobSpec) -> None:
    """In mode `local-only` (the configuration's or the tenant's), a job naming a non-local
    provider is refused (422 `local_only`), as a session is; the run checks again through the
    provider gate (a mode set after the submission)."""
    tenant = db.get(Tenant, tenant_id)
    mode = mode_in_force(rt.settings, tenant=tenant.mode if tenant else None, session=None)
    provider, model = rt.providers.resolve(spec.provider, spec.model)
    check_session_mode(rt, provider=provider, model=model, mode=mode, routed=False)


def submit_job(rt: Runtime, tenant_id: uuid.UUID, spec: JobSpec) -> uuid.UUID:
    """Store a queued job (the caller publishes it)."""
    check_spec(rt, spec)
    check_budget(rt, tenant_id, spec, [spec.input])
    with transaction(rt.db) as db:
        check_mode(rt, db, tenant_id, spec)
        return store.create_job(db, tenant_id, spec)


def submit_batch(
    rt: Runtime, tenant_id: uuid.UUID, spec: JobSpec, inputs: Sequence[Any]
) -> tuple[uuid.UUID, list[uuid.UUID]]:
    """Store a batch with one queued job per input (the caller publishes them)."""
    check_spec(rt, spec)
    check_budget(rt, tenant_id, spec, inputs)
    with transaction(rt.db) as db:
        check_mode(rt, db, tenant_id, spec)
        return store.create_batch(db, tenant_id, spec, inputs)
