"""SQL of LLM-function jobs and batches: created in one statement, claimed with a lease and
fenced by their run count, each model call stored as it ends, ends counted into their batch.
See docs/jobs.md."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NotRequired, TypedDict

from pydantic import JsonValue
from sqlalchemy import Text, and_, func, insert, literal, or_, select, update
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.sql import cast

from ..messages import ErrorDoc, JsonObject
from ..vocabulary import BatchStatus, JobStatus
from .db import Executor
from .job_tables import Batch, Job, batches_table, jobs_table
from .sql import Params


class JobCallDoc(TypedDict):
    """One model call of a job, as its `attempts` keep it."""

    n: int
    output: JsonValue
    error: str | None
    input_tokens: int
    output_tokens: int
    provider: str
    model: str
    checked: NotRequired[bool]
    """False while the answer is stored but not yet validated (absent: validated)."""


_j, _b = jobs_table.c, batches_table.c
_OPEN = (JobStatus.QUEUED.value, JobStatus.RUNNING.value)


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a job asks (one per input of a batch)."""

    instructions: str
    input: Any
    result_schema: JsonObject
    provider: str | None
    model: str | None
    max_attempts: int
    metadata: JsonObject


def _values(tenant_id: uuid.UUID, spec: JobSpec) -> Params:
    return {
        "tenant_id": tenant_id,
        "status": JobStatus.QUEUED.value,
        "instructions": spec.instructions,
        "input": spec.input,
        "result_schema": spec.result_schema,
        "provider": spec.provider,
        "model": spec.model,
        "max_attempts": spec.max_attempts,
        "metadata": spec.metadata,
        "attempts": [],
    }


def create_job(db: Executor, tenant_id: uuid.UUID, spec: JobSpec) -> uuid.UUID:
    job_id = uuid.uuid4()
    db.execute(insert(jobs_table).values(id=job_id, **_values(tenant_id, spec)))
    return job_id


def create_batch(
    db: Executor, tenant_id: uuid.UUID, base: JobSpec, inputs: Sequence[Any]
) -> tuple[uuid.UUID, list[uuid.UUID]]:
    """A batch and one queued job per input (indexed from 0), in the caller's transaction."""
    batch_id = uuid.uuid4()
    db.execute(
        insert(batches_table).values(
            id=batch_id, tenant_id=tenant_id, status=BatchStatus.RUNNING.value, count=len(inputs)
        )
    )
    ids = [uuid.uuid4() for _ in inputs]
    common = _values(tenant_id, base)
    rows = [
        {**common, "id": i, "batch_id": batch_id, "batch_index": n, "input": value}
        for n, (i, value) in enumerate(zip(ids, inputs, strict=True))
    ]
    for start in range(0, len(rows), 1000):
        db.execute(insert(jobs_table), rows[start : start + 1000])
    return batch_id, ids


def get_job(db: Executor, job_id: uuid.UUID, *, tenant_id: uuid.UUID) -> Job | None:
    query = select(Job).where(Job.id == job_id, Job.tenant_id == tenant_id)
    return db.execute(query).scalar_one_or_none()


def get_batch(db: Executor, batch_id: uuid.UUID, *, tenant_id: uuid.UUID) -> Batch | None:
    query = select(Batch).where(Batch.id == batch_id, Batch.tenant_id == tenant_id)
    return db.execute(query).scalar_one_or_none()


def batch_counts(db: Executor, batch_id: uuid.UUID) -> dict[str, int]:
    """How many of the batch's jobs are in each status."""
    rows = db.execute(
        select(_j.status, func.count()).where(_j.batch_id == batch_id).group_by(_j.status)
    )
    return {str(status): int(n) for status, n in rows}


def batch_results(db: Executor, batch_id: uuid.UUID, *, offset: int, limit: int) -> Sequence[Job]:
    query = (
        select(Job)
        .where(Job.batch_id == batch_id, Job.batch_index >= offset)
        .order_by(Job.batch_index)
        .limit(limit)
    )
    return db.execute(query).scalars().all()


def claim(db: Executor, job_id: uuid.UUID, *, lease_s: float) -> Job | None:
    """Start a run of a queued job, or of a running one whose lease ran out (its worker died);
    None when another run holds it or it has ended."""
    lease = func.now() + timedelta(seconds=lease_s)
    return db.execute(
        update(Job)
        .where(
            Job.id == job_id,
            or_(
                Job.status == JobStatus.QUEUED,
                and_(Job.status == JobStatus.RUNNING, Job.lease_until < func.now()),
            ),
        )
        .values(status=JobStatus.RUNNING, attempt=Job.attempt + 1, lease_until=lease)
        .values(updated_at=func.now())
        .returning(Job)
    ).scalar_one_or_none()


def renew(db: Executor, job_id: uuid.UUID, run: int, *, lease_s: float) -> bool:
    """Extend the run's lease (before a model call); False if a newer run owns the job."""
    lease = func.now() + timedelta(seconds=lease_s)
    done = db.execute(
        update(jobs_table)
        .where(_j.id == job_id, _j.attempt == run, _j.status == JobStatus.RUNNING.value)
        .values(lease_until=lease, updated_at=func.now())
        .returning(_j.id)
    )
    return done.first() is not None


def add_call(
    db: Executor,
    job_id: uuid.UUID,
    run: int,
    *,
    call: JobCallDoc,
    input_tokens: int,
    output_tokens: int,
    cost: float,
) -> bool:
    """Append one model call's record and usage, fenced by the run; False if not owned."""
    done = db.execute(
        update(jobs_table)
        .where(_j.id == job_id, _j.attempt == run, _j.status == JobStatus.RUNNING.value)
        .values(
            attempts=_j.attempts.op("||")(cast(literal([call], JSONB), JSONB)),
            input_tokens=_j.input_tokens + input_tokens,
            output_tokens=_j.output_tokens + output_tokens,
            cost_usd=_j.cost_usd + cost,
            updated_at=func.now(),
        )
        .returning(_j.id)
    )
    return done.first() is not None


def judge_call(db: Executor, job_id: uuid.UUID, run: int, *, call: JobCallDoc) -> bool:
    """Replace the stored call `call["n"]` (its answer, validated now), fenced by the run;
    False if not owned."""
    at = literal([str(call["n"] - 1)], ARRAY(Text))
    done = db.execute(
        update(jobs_table)
        .where(_j.id == job_id, _j.attempt == run, _j.status == JobStatus.RUNNING.value)
        .values(
            attempts=func.jsonb_set(_j.attempts, at, cast(literal(call, JSONB), JSONB)),
            updated_at=func.now(),
        )
        .returning(_j.id)
    )
    return done.first() is not None


def finish(
    db: Executor,
    job_id: uuid.UUID,
    run: int,
    *,
    status: JobStatus,
    result: Any = None,
    error: ErrorDoc | None = None,
) -> Job | None:
    """End the job, fenced by the run; None if another run owns it or it already ended."""
    return db.execute(
        update(Job)
        .where(Job.id == job_id, Job.attempt == run, Job.status == JobStatus.RUNNING)
        .values(
            status=status,
            result=result,
            error=error,
            lease_until=None,
            finished_at=func.now(),
            updated_at=func.now(),
        )
        .returning(Job)
    ).scalar_one_or_none()


def count_into_batch(db: Executor, batch_id: uuid.UUID, *, succeeded: bool) -> Batch | None:
    """Count an ended job into its batch; returns the batch when this made it complete."""
    column = "succeeded" if succeeded else "failed"
    row = db.execute(
        update(Batch)
        .where(Batch.id == batch_id)
        .values({column: getattr(Batch, column) + 1})
        .returning(Batch)
    ).scalar_one()
    if row.status == BatchStatus.RUNNING and row.succeeded + row.failed >= row.count:
        return db.execute(
            update(Batch)
            .where(Batch.id == batch_id, Batch.status == BatchStatus.RUNNING)
            .values(status=BatchStatus.COMPLETED, finished_at=func.now())
            .returning(Batch)
        ).scalar_one_or_none()
    return None


def take_stuck(db: Executor, *, older_than_s: float, limit: int) -> list[tuple[uuid.UUID, bool]]:
    """Open jobs nobody is running: queued and not claimed for `older_than_s` (a lost
    publish), or running with an expired lease (a dead worker); marked as just re-published
    and returned as (id, in a batch)."""
    stale = func.now() - timedelta(seconds=older_than_s)
    stuck = (
        select(_j.id)
        .where(
            _j.status.in_(_OPEN),
            _j.updated_at < stale,
            or_(_j.status == JobStatus.QUEUED.value, _j.lease_until < func.now()),
        )
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    rows = db.execute(
        update(jobs_table)
        .where(_j.id.in_(stuck.scalar_subquery()))
        .values(updated_at=func.now())
        .returning(_j.id, _j.batch_id)
    )
    return [(r.id, r.batch_id is not None) for r in rows]
