"""A job's answer is recorded (its call, usage and cost) before it is validated against the
tenant's `result_schema`: a validation that raises makes the answer invalid instead of failing
the run, and an answer a stopped run left unvalidated is never sent for again (real API, real
workers, the wire-level fake provider counting requests)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import text
from support import Api, Fakes, wait_until

from cortex_workers.runtime import get_runtime
from cortex_workers.turns.jobs import UNCHECKED

REPLY = {"text": json.dumps({"a": 1}), "usage": {"input": 12, "output": 40}}


def _post(client: Api, prompt: str, schema: dict[str, Any]) -> str:
    body = {"instructions": "Answer.", "input": prompt, "result_schema": schema}
    body |= {"provider": "openai", "model": "gpt-4o", "max_attempts": 1}
    r = client.http.post("/v1/jobs", json=body)
    assert r.status_code == 202, r.text
    return str(r.json()["id"])


def _ended(client: Api, job_id: str, asked: Callable[[], int] | None = None) -> dict[str, Any]:
    """The job once it has ended, or as soon as `asked()` (the provider's calls) passes 1: long
    enough for a run that stopped without a verdict to be swept and run again (its lease is
    `lease_s` + the provider's timeout)."""

    def ended() -> dict[str, Any] | None:
        job = dict(client.http.get(f"/v1/jobs/{job_id}").json())
        again = asked is not None and asked() > 1
        return job if job["status"] in ("succeeded", "failed") or again else None

    return dict(wait_until(ended, timeout=150, interval=0.2, what=f"job {job_id}"))


def test_a_validation_that_raises_leaves_the_call_recorded_and_sent_once(
    client: Api, fakes: Fakes
) -> None:
    prompt = f"record first {uuid.uuid4().hex}"
    fakes.openai.enqueue(prompt, REPLY)
    # a reference no registry resolves: the validator raises while applying it
    asked = lambda: len(fakes.openai.requests_for(prompt))  # noqa: E731
    job = _ended(client, _post(client, prompt, {"$ref": "urn:example:nowhere"}), asked)
    assert asked() == 1  # the answer was not sent for again
    assert job["status"] == "failed" and job["error"]["code"] == "invalid_result"
    (call,) = job["attempts"]
    assert "could not be applied" in call["error"] and call["checked"] is True
    assert (call["input_tokens"], call["output_tokens"]) == (12, 40)
    usage = job["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (12, 40) and job["cost_usd"] > 0
    assert len(fakes.openai.requests_for(prompt)) == 1


def test_an_answer_a_stopped_run_left_unvalidated_is_not_sent_for_again(
    client: Api, fakes: Fakes
) -> None:
    prompt = f"stopped run {uuid.uuid4().hex}"
    fakes.openai.enqueue(prompt, REPLY)
    job_id = _post(client, prompt, {"type": "object"})
    assert _ended(client, job_id)["status"] == "succeeded"
    # the row as a run leaves it when its worker dies after recording the answer, before
    # its validation ends: running, the answer unchecked, the lease run out
    with get_runtime().engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE jobs SET status = 'running', result = NULL, finished_at = NULL,"
                " lease_until = now() - interval '1 minute', updated_at = now() - interval"
                " '1 minute', attempts = jsonb_set(attempts, '{0,checked}', 'false')"
                " WHERE id = :id"
            ),
            {"id": uuid.UUID(job_id)},
        )
    asked = lambda: len(fakes.openai.requests_for(prompt))  # noqa: E731
    job = _ended(client, job_id, asked)  # the sweep sends it again; the next run ends it
    assert asked() == 1  # ... without asking the provider again
    assert job["status"] == "failed" and job["error"]["code"] == "invalid_result"
    (call,) = job["attempts"]
    assert call["error"] == UNCHECKED and call["checked"] is True
    assert len(fakes.openai.requests_for(prompt)) == 1
