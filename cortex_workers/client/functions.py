"""LLM functions: instructions and a result type; one call is one job, a map is one batch."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

from ..vocabulary import BatchStatus, JobStatus
from .errors import JobFailed
from .models import BatchResult, BatchResultsPage, Job

if TYPE_CHECKING:
    from .aio import AsyncClient
    from .sync import Client

R = TypeVar("R", bound=BaseModel)
POLL_S = (0.1, 0.2, 0.5, 1.0)
"""The waits between polls of a job or batch: quick at first, then once a second."""
RESULTS_PAGE = 1000


def polls() -> Iterator[float]:
    yield from POLL_S
    while True:
        yield POLL_S[-1]


def input_value(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def job_result(job: Job, result: type[R]) -> R:
    if job.status is not JobStatus.SUCCEEDED:
        raise JobFailed(job.id, job.error or [a.error for a in job.attempts])
    return result.model_validate(job.result)


def batch_value(item: BatchResult, result: type[R]) -> R:
    if item.status is not JobStatus.SUCCEEDED:
        raise JobFailed(item.job_id, item.error)
    return result.model_validate(item.result)


def page_values(page: BatchResultsPage, result: type[R]) -> list[R]:
    return [batch_value(r, result) for r in page.results]


class _Spec(Generic[R]):
    def __init__(
        self,
        instructions: str,
        result: type[R],
        *,
        provider: str | None,
        model: str | None,
        max_attempts: int,
        metadata: dict[str, Any] | None,
    ) -> None:
        self.instructions = instructions
        self.result = result
        self.schema = result.model_json_schema()
        self.options: dict[str, Any] = {
            "provider": provider,
            "model": model,
            "max_attempts": max_attempts,
            "metadata": metadata,
        }


class Function(_Spec[R]):
    """`fn(input)` → the result of one job; `fn.map(inputs)` → the results of one batch, in
    the inputs' order. A job that fails raises `JobFailed`."""

    def __init__(self, client: Client, instructions: str, result: type[R], **options: Any) -> None:
        super().__init__(instructions, result, **options)
        self._client = client

    def __call__(self, input: Any) -> R:
        jobs = self._client.jobs
        accepted = jobs.create(self.instructions, input_value(input), self.schema, **self.options)
        for wait in polls():
            job = jobs.get(accepted.id)
            if job.status.is_terminal:
                return job_result(job, self.result)
            time.sleep(wait)
        raise AssertionError("unreachable")

    def map(self, inputs: list[Any]) -> list[R]:
        batches = self._client.batches
        values = [input_value(i) for i in inputs]
        accepted = batches.create(self.instructions, self.schema, values, **self.options)
        for wait in polls():
            if batches.get(accepted.id).status is BatchStatus.COMPLETED:
                break
            time.sleep(wait)
        out: list[R] = []
        offset: int | None = 0
        while offset is not None:
            page = batches.results(accepted.id, offset=offset, limit=RESULTS_PAGE)
            out.extend(page_values(page, self.result))
            offset = page.next_offset
        return out


class AsyncFunction(_Spec[R]):
    """`Function` for the async client: `await fn(input)`, `await fn.map(inputs)`."""

    def __init__(
        self, client: AsyncClient, instructions: str, result: type[R], **options: Any
    ) -> None:
        super().__init__(instructions, result, **options)
        self._client = client

    async def __call__(self, input: Any) -> R:
        jobs = self._client.jobs
        accepted = await jobs.create(
            self.instructions, input_value(input), self.schema, **self.options
        )
        for wait in polls():
            job = await jobs.get(accepted.id)
            if job.status.is_terminal:
                return job_result(job, self.result)
            await asyncio.sleep(wait)
        raise AssertionError("unreachable")

    async def map(self, inputs: list[Any]) -> list[R]:
        batches = self._client.batches
        values = [input_value(i) for i in inputs]
        accepted = await batches.create(self.instructions, self.schema, values, **self.options)
        for wait in polls():
            if (await batches.get(accepted.id)).status is BatchStatus.COMPLETED:
                break
            await asyncio.sleep(wait)
        out: list[R] = []
        offset: int | None = 0
        while offset is not None:
            page = await batches.results(accepted.id, offset=offset, limit=RESULTS_PAGE)
            out.extend(page_values(page, self.result))
            offset = page.next_offset
        return out
