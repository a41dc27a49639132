"""Request and response bodies of the job and batch routes (docs/jobs.md)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, field_validator

from ..messages import ErrorDoc, JsonObject
from ..store.jobs import JobSpec
from ..vocabulary import BatchStatus, JobStatus
from .schemas import MAX_TEXT, SessionCreate, StorableBody, Usage

MAX_BATCH_INPUTS = 10_000


class JobFields(StorableBody):
    """What a job and a batch share."""

    instructions: str = Field(min_length=1, max_length=MAX_TEXT)
    result_schema: JsonObject = Field(description="The JSON Schema the answer must follow.")
    provider: str | None = Field(default=None, min_length=1, max_length=100)
    model: str | None = Field(default=None, min_length=1, max_length=200)
    max_attempts: int = Field(default=3, ge=1, le=10)
    metadata: JsonObject = Field(
        default_factory=dict,
        description="Free-form; `metadata.script` drives the scripted provider (one reply "
        "per attempt).",
    )

    @field_validator("metadata")
    @classmethod
    def _script_is_valid(cls, value: JsonObject) -> JsonObject:
        return SessionCreate._script_is_valid(value)

    def spec(self, input: Any = None) -> JobSpec:
        return JobSpec(
            instructions=self.instructions,
            input=input,
            result_schema=self.result_schema,
            provider=self.provider,
            model=self.model,
            max_attempts=self.max_attempts,
            metadata=self.metadata,
        )


class JobCreate(JobFields):
    """One LLM function call: `input` in, JSON valid against `result_schema` out."""

    input: Any = Field(description="Any JSON: the text or data the instructions apply to.")


class BatchCreate(JobFields):
    """The same instructions and schema over many inputs: one job per input."""

    inputs: list[Any] = Field(min_length=1, max_length=MAX_BATCH_INPUTS)


class JobAccepted(BaseModel):
    id: uuid.UUID
    status: JobStatus


class BatchAccepted(BaseModel):
    id: uuid.UUID
    count: int


class JobAttempt(BaseModel):
    """One model call of a job."""

    n: int
    output: Any
    """The answer (parsed JSON when it was JSON, else its text)."""
    error: str | None
    """Why the answer was refused (schema validation, or the provider's error); null if valid."""
    input_tokens: int
    output_tokens: int
    provider: str
    model: str
    checked: bool = True
    """False while the answer is recorded (with its usage and cost) but not yet validated."""


class JobOut(BaseModel):
    id: uuid.UUID
    status: JobStatus
    result: Any
    error: ErrorDoc | None
    attempts: list[JobAttempt]
    usage: Usage
    cost_usd: float
    provider: str | None
    model: str | None
    max_attempts: int
    batch_id: uuid.UUID | None
    batch_index: int | None
    metadata: JsonObject
    created_at: datetime
    finished_at: datetime | None


class BatchOut(BaseModel):
    id: uuid.UUID
    status: BatchStatus
    count: int
    counts: dict[JobStatus, int]
    """How many jobs are in each status."""
    progress: float
    """The share of jobs that ended, 0 to 1."""
    created_at: datetime
    finished_at: datetime | None


class BatchResult(BaseModel):
    index: int
    job_id: uuid.UUID
    status: JobStatus
    result: Any
    error: ErrorDoc | None


class BatchResults(BaseModel):
    results: list[BatchResult]
    next_offset: int | None
    """The `offset` of the next page; null after the last one."""
