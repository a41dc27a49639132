"""LLM-function jobs: an answer must be JSON valid against the job's schema; an invalid one is
retried with the validation error fed back, up to `max_attempts`."""

from __future__ import annotations

import json
import uuid
from typing import Any

from support import Api, Fakes, wait_until

SCHEMA = {
    "type": "object",
    "properties": {"sentiment": {"enum": ["positive", "negative"]}, "score": {"type": "number"}},
    "required": ["sentiment", "score"],
}
VALID = {"sentiment": "positive", "score": 0.9}


def post_job(client: Api, **body: Any) -> str:
    r = client.http.post(
        "/v1/jobs",
        json={"instructions": "Classify the review.", "result_schema": SCHEMA, **body},
    )
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "queued"
    return str(r.json()["id"])


def wait_job(client: Api, job_id: str) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        job = dict(client.http.get(f"/v1/jobs/{job_id}").json())
        return job if job["status"] in ("succeeded", "failed") else None

    return dict(wait_until(ended, timeout=30, interval=0.1, what=f"job {job_id}"))


def test_an_invalid_answer_then_a_valid_one_succeeds_on_attempt_two(client: Api) -> None:
    script = [{"text": '{"sentiment": "meh"}'}, {"text": json.dumps(VALID)}]
    job = wait_job(client, post_job(client, input="Great!", metadata={"script": script}))
    assert job["status"] == "succeeded" and job["result"] == VALID
    first, second = job["attempts"]
    assert first["output"] == {"sentiment": "meh"} and "score" in first["error"]
    assert second["n"] == 2 and second["error"] is None and second["output"] == VALID
    assert job["usage"]["output_tokens"] > 0 and job["error"] is None


def test_an_answer_never_valid_fails_with_each_attempts_error(client: Api) -> None:
    script = [{"text": "not json"}, {"text": '{"sentiment": "positive"}'}, {"text": "[]"}]
    job = wait_job(client, post_job(client, input="Hm.", metadata={"script": script}))
    assert job["status"] == "failed" and job["result"] is None
    assert job["error"]["code"] == "invalid_result"
    errors = [a["error"] for a in job["attempts"]]
    assert len(errors) == 3 and all(errors)
    assert "not JSON" in errors[0] and "score" in errors[1] and "object" in errors[2]


def test_a_schema_that_is_not_a_json_schema_is_refused(client: Api) -> None:
    r = client.http.post(
        "/v1/jobs",
        json={"instructions": "x", "input": "y", "result_schema": {"type": "nonsense"}},
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_result_schema"
    assert client.http.get(f"/v1/jobs/{uuid.uuid4()}").status_code == 404


def test_openai_receives_the_schema_as_response_format(client: Api, fakes: Fakes) -> None:
    review = f"Lovely product {uuid.uuid4()}"
    fakes.openai.enqueue(review, {"text": json.dumps(VALID)})
    job_id = post_job(client, input=review, provider="openai", model="gpt-4o")
    job = wait_job(client, job_id)
    assert job["status"] == "succeeded" and job["result"] == VALID
    (request,) = fakes.openai.requests_for(review)
    response_format = request.body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["schema"] == SCHEMA
    assert job["cost_usd"] > 0 and job["attempts"][0]["provider"] == "openai"


def test_anthropic_is_forced_to_answer_through_the_result_tool(client: Api, fakes: Fakes) -> None:
    review = f"Lovely product {uuid.uuid4()}"
    fakes.anthropic.enqueue(review, {"tool_calls": [{"name": "result", "arguments": VALID}]})
    job = wait_job(client, post_job(client, input=review, provider="anthropic"))
    assert job["status"] == "succeeded" and job["result"] == VALID
    (request,) = fakes.anthropic.requests_for(review)
    assert request.body["tool_choice"] == {"type": "tool", "name": "result"}
    (tool,) = request.body["tools"]
    assert tool["name"] == "result" and tool["input_schema"] == SCHEMA


def test_a_provider_outage_costs_an_attempt_and_a_refusal_fails_the_job(client: Api) -> None:
    outage = [{"error": {"status": 503, "message": "overloaded"}}, {"text": json.dumps(VALID)}]
    job = wait_job(client, post_job(client, input="ok", metadata={"script": outage}))
    assert job["status"] == "succeeded" and job["result"] == VALID
    assert "503" in job["attempts"][0]["error"] and job["attempts"][1]["error"] is None
    refusal = [{"error": {"status": 400, "message": "bad request"}}]
    job = wait_job(client, post_job(client, input="ok", metadata={"script": refusal}))
    assert job["status"] == "failed" and job["error"]["code"] == "provider_error"
    assert job["attempts"] == []
