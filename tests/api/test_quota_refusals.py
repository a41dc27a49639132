"""The per-tenant quotas on jobs, batches and open session streams, end to end: an API with
small quotas on the shared stack (its workers run what it accepts); past each quota the
request answers 429 in the error shape with `Retry-After`, and stores (or holds) nothing."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from budget_support import new_tenant
from side_stack import side_api
from sqlalchemy import text
from support import Api, Stack, wait_until

from cortex_workers.runtime import get_runtime

QUOTAS = {
    "CORTEX_TENANT_JOBS_PER_MINUTE": "2",
    "CORTEX_TENANT_BATCHES_PER_MINUTE": "1",
    "CORTEX_TENANT_MAX_STREAMS": "2",
}
JOB = {
    "instructions": "Answer with an object.",
    "result_schema": {"type": "object"},
    "metadata": {"script": [{"text": "{}"}]},
}


@pytest.fixture(scope="module")
def quota_api(stack: Stack, api: Api, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """A second API process on the stack's database, Redis and broker, with small quotas."""
    tests_dir = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, **stack.env, "PYTHONPATH": os.pathsep.join([tests_dir, "."]), **QUOTAS}
    log = Path(str(tmp_path_factory.mktemp("quota-api"))) / "api.log"
    with side_api(env, log) as base:
        yield Api(base)


@pytest.fixture
def tenant(quota_api: Api) -> Iterator[tuple[uuid.UUID, Api]]:
    tenant_id, key = new_tenant()
    with quota_api.as_tenant(key) as client:
        yield tenant_id, client


def _count(table: str, tenant_id: uuid.UUID) -> int:
    with get_runtime().engine.connect() as conn:
        query = text(f"SELECT count(*) FROM {table} WHERE tenant_id = :t")  # noqa: S608
        return int(conn.execute(query, {"t": tenant_id}).scalar_one())


def _refused_429(r: httpx.Response, code: str) -> dict[str, Any]:
    """The refusal's error, after checking its shape and its Retry-After."""
    assert r.status_code == 429, r.text
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code and body["error"]["message"]
    assert int(r.headers["Retry-After"]) >= 1
    return dict(body["error"])


def _ended(client: Api, job_id: str) -> str:
    def ended() -> str | None:
        status = str(client.http.get(f"/v1/jobs/{job_id}").json()["status"])
        return status if status in ("succeeded", "failed") else None

    return str(wait_until(ended, timeout=60, interval=0.2, what=f"job {job_id}"))


def test_a_job_past_the_tenant_s_jobs_per_minute_is_refused_and_stored_nowhere(
    tenant: tuple[uuid.UUID, Api],
) -> None:
    tenant_id, client = tenant
    accepted = [client.http.post("/v1/jobs", json={**JOB, "input": str(i)}) for i in range(2)]
    assert [r.status_code for r in accepted] == [202, 202], [r.text for r in accepted]
    error = _refused_429(client.http.post("/v1/jobs", json={**JOB, "input": "3"}), "rate_limited")
    assert error["details"]["limit_per_minute"] == 2
    assert _count("jobs", tenant_id) == 2
    assert [_ended(client, r.json()["id"]) for r in accepted] == ["succeeded", "succeeded"]


def test_a_batch_past_the_tenant_s_batches_per_minute_is_refused_and_stored_nowhere(
    tenant: tuple[uuid.UUID, Api],
) -> None:
    tenant_id, client = tenant
    first = client.http.post("/v1/batches", json={**JOB, "inputs": ["a", "b"]})
    assert first.status_code == 202, first.text
    refused = client.http.post("/v1/batches", json={**JOB, "inputs": ["c", "d", "e"]})
    error = _refused_429(refused, "rate_limited")
    assert error["details"]["limit_per_minute"] == 1
    assert (_count("batches", tenant_id), _count("jobs", tenant_id)) == (1, 2)


def test_a_session_stream_past_the_tenant_s_open_streams_is_refused_and_holds_no_slot(
    tenant: tuple[uuid.UUID, Api],
) -> None:
    tenant_id, client = tenant
    sid = client.create_session()["id"]
    url = f"/v1/sessions/{sid}/events"
    slots = f"cortex:streams:{tenant_id}"
    redis = get_runtime().redis
    with ExitStack() as open_streams:
        first = open_streams.enter_context(client.http.stream("GET", url))
        second = open_streams.enter_context(client.http.stream("GET", url))
        assert (first.status_code, second.status_code) == (200, 200)
        assert redis.zcard(slots) == 2
        error = _refused_429(client.http.get(url), "quota_exceeded")
        assert error["details"] == {"quota": "streams", "limit": 2}
        assert redis.zcard(slots) == 2  # the refused stream took none
    # the slots come back when the streams close: another stream opens
    wait_until(lambda: redis.zcard(slots) == 0, timeout=30, interval=0.2, what="slots freed")
    with client.http.stream("GET", url) as again:
        assert again.status_code == 200
