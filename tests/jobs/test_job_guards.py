"""A job cannot capture a worker: its answer's validation against the tenant's schema runs
within a time budget (a catastrophic `pattern`, a schema whose `anyOf`s branch exponentially:
the answer is invalid, the job ends), and the free scripted model's delays are capped (real
API, real workers)."""

from __future__ import annotations

import uuid
from typing import Any

from support import Api, wait_until


def _ended(client: Api, job_id: str) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        job = dict(client.http.get(f"/v1/jobs/{job_id}").json())
        return job if job["status"] in ("succeeded", "failed") else None

    return dict(wait_until(ended, timeout=60, interval=0.2, what=f"job {job_id}"))


def test_a_catastrophic_result_pattern_ends_the_job_instead_of_pinning_a_worker(
    client: Api,
) -> None:
    hostile = "a" * 5000 + "!"
    script = [{"text": f'"{hostile}"'}]
    posted = client.http.post(
        "/v1/jobs",
        json={
            "instructions": "Repeat it.",
            "input": uuid.uuid4().hex,
            "result_schema": {"type": "string", "pattern": "^(a|aa)+$"},
            "max_attempts": 1,
            "metadata": {"script": script},
        },
    )
    assert posted.status_code == 202, posted.text
    job = _ended(client, posted.json()["id"])
    assert job["status"] == "failed" and job["error"]["code"] == "invalid_result"
    (attempt,) = job["attempts"]
    assert "pattern" in attempt["error"] or "does not match" in attempt["error"]


def test_a_schema_that_branches_exponentially_ends_the_job_instead_of_pinning_a_worker(
    client: Api,
) -> None:
    depth = 40  # each level's anyOf tries both branches: 2**40 checks without a time budget
    defs: dict[str, Any] = {
        f"d{k}": {"anyOf": [{"$ref": f"#/$defs/d{k + 1}"}, {"$ref": f"#/$defs/d{k + 1}"}]}
        for k in range(depth)
    }
    defs[f"d{depth}"] = {"type": "string"}
    posted = client.http.post(
        "/v1/jobs",
        json={
            "instructions": "Answer.",
            "input": uuid.uuid4().hex,
            "result_schema": {"$ref": "#/$defs/d0", "$defs": defs},
            "max_attempts": 1,
            "metadata": {"script": [{"text": "1"}]},
        },
    )
    assert posted.status_code == 202, posted.text
    job = _ended(client, posted.json()["id"])
    assert job["status"] == "failed" and job["error"]["code"] == "invalid_result"
    (attempt,) = job["attempts"]
    assert "took too long" in attempt["error"]


def test_a_scripted_delay_past_the_cap_is_refused(client: Api) -> None:
    posted = client.http.post(
        "/v1/jobs",
        json={
            "instructions": "x",
            "input": "y",
            "result_schema": {"type": "object"},
            "metadata": {"script": [{"text": "{}", "first_token_ms": 600_000}]},
        },
    )
    refused = client.http.post(
        "/v1/sessions", json={"metadata": {"script": [{"text": "x", "first_token_ms": 600_000}]}}
    )
    assert refused.status_code == 422, refused.text
    assert posted.status_code in (202, 422)
