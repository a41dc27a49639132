"""`AsyncFunction`: an LLM function; one call is one job, a map is one batch."""

from __future__ import annotations

import asyncio
from typing import Any

from ...vocabulary import BatchStatus
from ..functions import (
    RESULTS_PAGE,
    FunctionSpec,
    R,
    input_value,
    job_result,
    page_values,
    polls,
)
from .resources import Batches, Jobs
from .transport import AsyncTransport


class AsyncFunction(FunctionSpec[R]):
    """`await fn(input)` → the result of one job; `await fn.map(inputs)` → the results of one
    batch, in the inputs' order. A job that fails raises `JobFailed`."""

    def __init__(
        self, transport: AsyncTransport, instructions: str, result: type[R], **options: Any
    ) -> None:
        super().__init__(instructions, result, **options)
        self._jobs = Jobs(transport)
        self._batches = Batches(transport)

    async def __call__(self, input: Any) -> R:
        jobs = self._jobs
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
        batches = self._batches
        values = [input_value(i) for i in inputs]
        accepted = await batches.create(self.instructions, self.schema, values, **self.options)
        for wait in polls():
            batch = await batches.get(accepted.id)
            if batch.status is BatchStatus.COMPLETED:
                break
            await asyncio.sleep(wait)
        out: list[R] = []
        offset: int | None = 0
        while offset is not None:
            page = await batches.results(accepted.id, offset=offset, limit=RESULTS_PAGE)
            out.extend(page_values(page, self.result))
            offset = page.next_offset
        return out
