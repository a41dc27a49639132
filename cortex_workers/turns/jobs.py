"""Running an LLM-function job: one model call whose answer must be JSON valid against the
job's `result_schema`, retried with the validation error fed back up to `max_attempts`.

Native structured output where the provider has it (OpenAI `response_format`, Anthropic forced
tool use), the schema in the prompt otherwise. A run is claimed with a lease and every write is
fenced by the run number, so a worker that dies mid-run loses nothing but its model call: the
sweep re-publishes the job and the next run goes on from the calls already stored.

Each call holds its maximum cost in the daily budgets while it runs and is settled to its real
cost after it (`job_spend`); a call the budgets cannot take ends the job `budget_exhausted`.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match
from sqlalchemy.orm import Session as Db

from ..errors import RetryableError, TerminalError
from ..messages import Completion, ErrorDoc, JsonObject, Message, ModelRequest
from ..providers.anthropic_messages import RESULT_TOOL
from ..providers.base import ModelPrice
from ..providers.registry import Route
from ..runtime import Runtime, get_runtime
from ..store import jobs as store
from ..store import webhooks
from ..store.db import transaction
from ..store.job_tables import Job
from ..store.jobs import JobCallDoc
from ..store.models import Tenant
from ..vocabulary import JobStatus, LlmMode, WebhookEventType
from .guards import provider_gate
from .guards.modes import mode_in_force
from .job_schema import bounded_validator
from .job_spend import reserve_call
from .spend import Admitted

log = logging.getLogger(__name__)

NATIVE_KINDS = frozenset({"openai", "azure_openai", "anthropic"})
"""Provider kinds that take the schema natively (the others read it in the prompt)."""


def schema_problem(schema: JsonObject) -> str | None:
    """Why `schema` is not a valid JSON Schema, or None."""
    try:
        Draft202012Validator.check_schema(schema)
    except Exception as exc:  # SchemaError, or an unresolvable $ref
        return str(getattr(exc, "message", exc))
    return None


def check_answer(completion: Completion, schema: JsonObject) -> tuple[Any, str | None]:
    """The answer as JSON, and why it is not valid against `schema` (None when it is). A
    validator that raises makes the answer invalid with what it raised, never the run fail."""
    value, problem = parse_answer(completion)
    if problem is not None:
        return None, problem
    try:
        error = best_match(bounded_validator(schema).iter_errors(value))
    except ValidationError as exc:  # a pattern past the validation's time budget
        error = exc
    except Exception as exc:  # e.g. a `$ref` that cannot be resolved, or nested too deep
        return value, f"the result_schema could not be applied: {type(exc).__name__}: {exc}"[:500]
    if error is None:
        return value, None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return value, f"at {where}: {error.message}"


def parse_answer(completion: Completion) -> tuple[Any, str | None]:
    """The answer as JSON (the forced tool's arguments, or the text), or why it is not JSON."""
    forced = [c for c in completion.tool_calls if c.name == RESULT_TOOL]
    if forced:
        return forced[0].arguments, None
    try:
        return json.loads(_unfenced(completion.text)), None
    except ValueError as exc:
        return None, f"the answer is not JSON: {exc}"


def _unfenced(text: str) -> str:
    """The JSON inside a Markdown code fence, if the model wrapped its answer in one."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        stripped = stripped.rsplit("```", 1)[0]
    return stripped.strip()


UNCHECKED = (
    "the answer's validation did not finish (its run stopped); it is not validated again, "
    "nor sent again"
)
"""The error of an answer a later run finds stored but not validated."""


@dataclass(frozen=True, slots=True)
class Call:
    """One model call of a job, as `GET /v1/jobs/{id}` shows it in `attempts`."""

    n: int
    output: Any
    error: str | None
    input_tokens: int
    output_tokens: int
    provider: str
    model: str
    checked: bool = True
    """False while the answer is stored but not yet validated."""

    def doc(self) -> JobCallDoc:
        return {
            "n": self.n,
            "output": self.output,
            "error": self.error,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "provider": self.provider,
            "model": self.model,
            "checked": self.checked,
        }

    @classmethod
    def of(cls, doc: JobCallDoc) -> Call:
        return cls(
            doc["n"],
            doc["output"],
            doc["error"],
            doc["input_tokens"],
            doc["output_tokens"],
            doc["provider"],
            doc["model"],
            doc.get("checked", True),
        )


def _route(rt: Runtime, job: Job) -> Route:
    provider, model = rt.providers.resolve(job.provider, job.model)
    return Route(provider, model)


def _is_native(rt: Runtime, route: Route) -> bool:
    return rt.providers.configs[route.provider].kind in NATIVE_KINDS


def build_request(rt: Runtime, job: Job, route: Route, *, n: int) -> ModelRequest:
    """The request of call `n` (from 1): the instructions, the input, and each earlier
    invalid answer with its validation error."""
    native = _is_native(rt, route)
    system = job.instructions + "\n\nAnswer with JSON only."
    if not native:
        system += " It must be valid against this JSON Schema:\n" + json.dumps(job.result_schema)
    messages = [Message("system", system), Message("user", text_of(job.input))]
    for earlier in job.attempts[: n - 1]:
        messages.append(Message("assistant", text_of(earlier.get("output"))))
        problem = earlier.get("error") or "the answer was not valid"
        messages.append(Message("user", f"That answer is invalid: {problem}. Answer again."))
    script = (job.metadata_ or {}).get("script")
    return ModelRequest(
        model=route.model,
        messages=tuple(messages),
        script=tuple(script) if isinstance(script, list) else None,
        call_index=n - 1,
        result_schema=job.result_schema if native else None,
    )


def text_of(value: Any) -> str:
    """An input or an answer as the model reads it: a string as is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def _gated(rt: Runtime, job: Job, route: Route, n: int, mode: LlmMode) -> provider_gate.Gated:
    """Call `n` through the provider gate (local-only, redaction), once the provider's rate
    limits let it go. Raises `TerminalError`s (`local_only`, `redaction_failed`)."""
    gated = provider_gate.guard(rt, route, build_request(rt, job, route, n=n), mode=mode)
    provider_gate.wait_for_rate_limit(rt, gated)
    return gated


def _answer(
    rt: Runtime, job: Job, run: int, n: int, gated: provider_gate.Gated
) -> Completion | Call:
    """Make call `n` of run `run` through the gate, holding its maximum cost in the daily
    budgets while it runs (a `TerminalError` `budget_exhausted` when they cannot take it);
    the answer, or the record of a call that failed and counts as an attempt."""
    route = gated.route

    def reserve(route: Route, request: ModelRequest) -> Admitted:
        return Admitted(
            route, request, reserve_call(rt, (job.id, job.tenant_id, run, n), route, request)
        )

    try:
        return provider_gate.send(rt, gated, reserve)
    except RetryableError as exc:  # counts as an attempt; the next one waits a little
        wait = exc.retry_after or rt.settings.retry_base_s * 2 ** (n - 1)
        time.sleep(min(wait, rt.settings.retry_max_s))
        return Call(n, None, f"{exc.code}: {exc.message}", 0, 0, route.provider, route.model)


def _unchecked(completion: Completion, route: Route, n: int) -> Call:
    """The answer as it is recorded before it is validated."""
    value, _ = parse_answer(completion)
    output = value if value is not None else completion.text
    tokens = (completion.input_tokens, completion.output_tokens)
    return Call(n, output, None, *tokens, route.provider, route.model, checked=False)


def _judged(call: Call, completion: Completion, schema: JsonObject) -> tuple[Call, Any]:
    """The recorded call with its validation's verdict, and the valid result (or None)."""
    value, problem = check_answer(completion, schema)
    output = value if value is not None else completion.text
    judged = replace(call, output=output, error=problem, checked=True)
    return judged, (value if problem is None else None)


def _store(
    rt: Runtime, job: Job, run: int, answer: Completion | Call, *, route: Route, price: ModelPrice
) -> tuple[Call, Any] | None:
    """Store the run's next call: a provider's error as it is; an answer first with its
    usage and cost, then its validation's verdict (a run that stops while validating never
    sends it again). The call and the valid result (or None); None when the run no longer
    owns the job."""
    if isinstance(answer, Call):
        return (answer, None) if _record(rt, job, run, answer, 0.0) else None
    unchecked = _unchecked(answer, route, len(job.attempts) + 1)
    cost = price.cost(unchecked.input_tokens, unchecked.output_tokens)
    if not _record(rt, job, run, unchecked, cost):
        return None
    call, result = _judged(unchecked, answer, job.result_schema)
    return (call, result) if _judge(rt, job, run, call) else None


def _unfinished(call: Call) -> Call:
    """An answer an earlier run recorded and did not finish validating (it hung past the
    run's lease, or its worker died): invalid, neither validated again nor sent again."""
    return replace(call, error=UNCHECKED, checked=True)


def _record(rt: Runtime, job: Job, run: int, call: Call, cost: float) -> bool:
    """Store the call with its usage and cost (fenced by the run); False if not owned."""
    with transaction(rt.db) as db:
        if not store.add_call(
            db,
            job.id,
            run,
            call=call.doc(),
            input_tokens=call.input_tokens,
            output_tokens=call.output_tokens,
            cost=cost,
        ):
            return False
    job.attempts = [*job.attempts, call.doc()]
    return True


def _judge(rt: Runtime, job: Job, run: int, call: Call) -> bool:
    """Store the verdict of a recorded call (fenced by the run); False if not owned."""
    with transaction(rt.db) as db:
        if not store.judge_call(db, job.id, run, call=call.doc()):
            return False
    job.attempts = [*job.attempts[: call.n - 1], call.doc()]
    return True


def _mode(rt: Runtime, db: Db, job: Job) -> LlmMode:
    tenant = db.get(Tenant, job.tenant_id)
    return mode_in_force(rt.settings, tenant=tenant.mode if tenant else None, session=None)


def run_job(job_id: uuid.UUID) -> None:
    """Claim a run of the job and make its remaining calls until one answer is valid."""
    rt = get_runtime()
    lease_s = rt.settings.lease_s
    with transaction(rt.db) as db:
        job = store.claim(db, job_id, lease_s=lease_s)
        mode = _mode(rt, db, job) if job is not None else LlmMode.NORMAL
    if job is None:
        return  # a duplicate delivery, or another run holds the job
    run, route = job.attempt, _route(rt, job)
    call_lease = lease_s + rt.providers.configs[route.provider].timeout_s
    price = rt.providers.price(route.provider, route.model)
    last = Call.of(job.attempts[-1]) if job.attempts else None
    if last is not None and not last.checked and not _judge(rt, job, run, _unfinished(last)):
        return  # (an earlier run stopped while validating its last answer)
    for n in range(len(job.attempts) + 1, job.max_attempts + 1):
        try:
            gated = _gated(rt, job, route, n, mode)
            with transaction(rt.db) as db:  # the lease covers the call and its reservation
                if not store.renew(db, job_id, run, lease_s=call_lease):
                    return  # a newer run owns the job
            answer = _answer(rt, job, run, n, gated)
        except TerminalError as exc:
            error: ErrorDoc = {"code": exc.code, "message": exc.message}
            if exc.details:
                error["details"] = exc.details
            _end(rt, job, run, error=error)
            return
        stored = _store(rt, job, run, answer, route=route, price=price)
        if stored is None:
            return  # a newer run owns the job
        call, result = stored
        if call.error is None:
            _end(rt, job, run, result=result)
            return
    message = f"no valid answer in {job.max_attempts} attempts; see each attempt's error"
    _end(rt, job, run, error={"code": "invalid_result", "message": message})


def _end(
    rt: Runtime, job: Job, run: int, *, result: Any = None, error: ErrorDoc | None = None
) -> None:
    """End the job, count it into its batch, and record the completion events, atomically."""
    status = JobStatus.FAILED if error is not None else JobStatus.SUCCEEDED
    with transaction(rt.db) as db:
        ended = store.finish(db, job.id, run, status=status, result=result, error=error)
        if ended is None:
            return
        if ended.batch_id is None:
            done = {"job_id": str(job.id), "status": status.value}
            webhooks.record_event(db, job.tenant_id, WebhookEventType.JOB_COMPLETED, done)
            return
        batch = store.count_into_batch(db, ended.batch_id, succeeded=error is None)
        if batch is not None:
            data: JsonObject = {"batch_id": str(batch.id), "status": batch.status.value}
            data |= {"count": batch.count}
            data |= {"succeeded": batch.succeeded, "failed": batch.failed}
            webhooks.record_event(db, job.tenant_id, WebhookEventType.BATCH_COMPLETED, data)


def take_stuck(rt: Runtime) -> list[tuple[uuid.UUID, bool]]:
    """Open jobs to publish again: never claimed (a lost publish) or whose run's lease ran
    out (a dead worker); each as (id, in a batch)."""
    with transaction(rt.db) as db:
        return store.take_stuck(db, older_than_s=rt.settings.republish_after_s, limit=1000)
