"""LLM-function jobs and batches: submit, read, page through a batch's results."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool

from ...dispatch import publish_jobs
from ...errors import NotFound
from ...store import jobs as store
from ...store.db import transaction
from ...store.job_tables import Job
from ...turns.job_submit import submit_batch, submit_job
from ...vocabulary import JobStatus
from ..deps import RuntimeDep, TenantDep
from ..job_schemas import (
    MAX_BATCH_INPUTS,
    BatchAccepted,
    BatchCreate,
    BatchOut,
    BatchResult,
    BatchResults,
    JobAccepted,
    JobAttempt,
    JobCreate,
    JobOut,
)
from ..ratelimit import take_batch, take_job
from ..schemas import Usage

router = APIRouter(tags=["jobs"])


@router.post("/v1/jobs", status_code=202, response_model=JobAccepted)
def create_job(body: JobCreate, rt: RuntimeDep, tenant_id: TenantDep) -> JobAccepted:
    """Queue one model call whose answer must be JSON valid against `result_schema`; an
    invalid answer is retried with the validation error, up to `max_attempts` calls.
    422 `invalid_result_schema` when the schema is not a JSON Schema."""
    take_job(rt, tenant_id)
    job_id = submit_job(rt, tenant_id, body.spec(body.input))
    publish_jobs([job_id], batch=False)
    return JobAccepted(id=job_id, status=JobStatus.QUEUED)


def _job_out(job: Job) -> JobOut:
    return JobOut(
        id=job.id,
        status=JobStatus(job.status),
        result=job.result,
        error=job.error,
        attempts=[JobAttempt.model_validate(a) for a in job.attempts],
        usage=Usage(input_tokens=job.input_tokens, output_tokens=job.output_tokens),
        cost_usd=float(job.cost_usd),
        provider=job.provider,
        model=job.model,
        max_attempts=job.max_attempts,
        batch_id=job.batch_id,
        batch_index=job.batch_index,
        metadata=job.metadata_,
        created_at=job.created_at,
        finished_at=job.finished_at,
    )


@router.get("/v1/jobs/{job_id}", response_model=JobOut)
def get_job(job_id: uuid.UUID, rt: RuntimeDep, tenant_id: TenantDep) -> JobOut:
    """Status (`queued`, `running`, `succeeded`, `failed`), result, each attempt's output and
    error, usage and cost."""
    with transaction(rt.db) as db:
        job = store.get_job(db, job_id, tenant_id=tenant_id)
        if job is None:
            raise NotFound(f"job {job_id} not found")
        return _job_out(job)


@router.post("/v1/batches", status_code=202, response_model=BatchAccepted)
async def create_batch(body: BatchCreate, rt: RuntimeDep, tenant_id: TenantDep) -> BatchAccepted:
    """Queue one job per input (up to 10,000), run by the `batch` workers at a lower priority
    than interactive turns."""
    await run_in_threadpool(take_batch, rt, tenant_id)
    batch_id, job_ids = await run_in_threadpool(
        submit_batch, rt, tenant_id, body.spec(), body.inputs
    )
    await run_in_threadpool(publish_jobs, job_ids, batch=True)
    return BatchAccepted(id=batch_id, count=len(job_ids))


@router.get("/v1/batches/{batch_id}", response_model=BatchOut)
def get_batch(batch_id: uuid.UUID, rt: RuntimeDep, tenant_id: TenantDep) -> BatchOut:
    """Counts of the batch's jobs by status, and its progress."""
    with transaction(rt.db) as db:
        batch = store.get_batch(db, batch_id, tenant_id=tenant_id)
        if batch is None:
            raise NotFound(f"batch {batch_id} not found")
        counts = dict.fromkeys(JobStatus, 0)
        counts |= {JobStatus(k): v for k, v in store.batch_counts(db, batch_id).items()}
        ended = counts[JobStatus.SUCCEEDED] + counts[JobStatus.FAILED]
        return BatchOut(
            id=batch.id,
            status=batch.status,
            count=batch.count,
            counts=counts,
            progress=ended / batch.count if batch.count else 1.0,
            created_at=batch.created_at,
            finished_at=batch.finished_at,
        )


@router.get("/v1/batches/{batch_id}/results", response_model=BatchResults)
def get_batch_results(
    batch_id: uuid.UUID,
    rt: RuntimeDep,
    tenant_id: TenantDep,
    offset: Annotated[int, Query(ge=0, le=MAX_BATCH_INPUTS)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> BatchResults:
    """The batch's results in input order, from index `offset`, at most `limit`."""
    with transaction(rt.db) as db:
        batch = store.get_batch(db, batch_id, tenant_id=tenant_id)
        if batch is None:
            raise NotFound(f"batch {batch_id} not found")
        jobs = store.batch_results(db, batch_id, offset=offset, limit=limit)
        results = [
            BatchResult(
                index=j.batch_index or 0,
                job_id=j.id,
                status=JobStatus(j.status),
                result=j.result,
                error=j.error,
            )
            for j in jobs
        ]
    end = offset + len(results)
    return BatchResults(results=results, next_offset=end if end < batch.count else None)
