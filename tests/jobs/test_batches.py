"""Batches: one job per input, run on the `batch` queue; counts, progress and paged results."""

from __future__ import annotations

from typing import Any

import pytest
from support import Api, wait_until

pytestmark = pytest.mark.servers

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def test_a_batch_of_200_completes_with_every_result_valid(client: Api) -> None:
    # the scripted model echoes the input, which is the answer the schema asks for
    inputs = [{"n": i} for i in range(200)]
    r = client.http.post(
        "/v1/batches",
        json={"instructions": "Return the input.", "result_schema": SCHEMA, "inputs": inputs},
    )
    assert r.status_code == 202, r.text
    batch_id, count = r.json()["id"], r.json()["count"]
    assert count == 200

    def completed() -> dict[str, Any] | None:
        batch = dict(client.http.get(f"/v1/batches/{batch_id}").json())
        return batch if batch["status"] == "completed" else None

    batch = wait_until(completed, timeout=60, interval=0.25, what="the batch to complete")
    results: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        page = client.http.get(
            f"/v1/batches/{batch_id}/results", params={"offset": offset, "limit": 64}
        ).json()
        results += page["results"]
        offset = page["next_offset"]
    failed = [r for r in results if r["status"] != "succeeded"]  # with their errors
    assert batch["counts"] == {"queued": 0, "running": 0, "succeeded": 200, "failed": 0}, failed
    assert batch["progress"] == 1.0 and batch["finished_at"]
    assert [r["index"] for r in results] == list(range(200))
    assert all(r["status"] == "succeeded" for r in results)
    assert [r["result"] for r in results] == inputs


def test_a_batch_over_the_limit_or_empty_is_refused(client: Api) -> None:
    body = {"instructions": "x", "result_schema": SCHEMA}
    assert client.http.post("/v1/batches", json={**body, "inputs": []}).status_code == 422
    too_many = {**body, "inputs": [1] * 10_001}
    assert client.http.post("/v1/batches", json=too_many).status_code in (413, 422)
