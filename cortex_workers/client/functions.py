"""LLM functions: instructions and a result type; one call is one job, a map is one batch.

What both clients' functions share (`aio.functions.AsyncFunction`, and `sync.functions.Function`
generated from it).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Generic, TypedDict, TypeVar

from pydantic import BaseModel

from ..vocabulary import JobStatus
from .errors import JobFailed
from .models import BatchResult, BatchResultsPage, Job, JsonObject

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


class JobOptions(TypedDict):
    """The options a function's every job is created with."""

    provider: str | None
    model: str | None
    max_attempts: int
    metadata: JsonObject | None


class FunctionSpec(Generic[R]):
    """What a function sends with each job: its instructions, its result's JSON Schema, and
    the options of its jobs."""

    def __init__(
        self,
        instructions: str,
        result: type[R],
        *,
        provider: str | None,
        model: str | None,
        max_attempts: int,
        metadata: JsonObject | None,
    ) -> None:
        self.instructions = instructions
        self.result = result
        self.schema = result.model_json_schema()
        self.options: JobOptions = {
            "provider": provider,
            "model": model,
            "max_attempts": max_attempts,
            "metadata": metadata,
        }
