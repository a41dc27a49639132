"""LLM-function jobs: a single job on queue `llm`, a batch's jobs on queue `batch`; the sweep
(queue `maintenance`) re-publishes jobs nobody runs."""

from __future__ import annotations

import logging
import uuid

from celery import shared_task

from ..dispatch import publish_jobs
from ..queues import RUN_BATCH_JOB, RUN_JOB, SWEEP_JOBS
from ..runtime import get_runtime
from ..turns.jobs import run_job as run
from ..turns.jobs import take_stuck

log = logging.getLogger(__name__)


@shared_task(name=RUN_JOB, ignore_result=True)
def run_job(job_id: str) -> None:
    run(uuid.UUID(job_id))


@shared_task(name=RUN_BATCH_JOB, ignore_result=True)
def run_batch_job(job_id: str) -> None:
    run(uuid.UUID(job_id))


@shared_task(name=SWEEP_JOBS, ignore_result=True, send_events=False)
def sweep_jobs() -> None:
    stuck = take_stuck(get_runtime())
    if stuck:
        log.info("publishing %d stuck jobs again", len(stuck))
    publish_jobs([job_id for job_id, in_batch in stuck if not in_batch], batch=False)
    publish_jobs([job_id for job_id, in_batch in stuck if in_batch], batch=True)
