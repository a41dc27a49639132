"""LLM functions (one job, one batch) and the jobs, batches and webhooks resources, through the
client against the real stack; the scripted model answers each attempt from `metadata.script`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from fakes.webhook_receiver import Receiver
from pydantic import BaseModel
from support import Api, wait_until

from cortex_workers.client import AsyncClient, Client, JobFailed, NotFound


class Sentiment(BaseModel):
    label: str
    score: float


VALID = {"label": "positive", "score": 0.9}


def scripted(*replies: object) -> dict[str, object]:
    return {"script": [{"text": r if isinstance(r, str) else json.dumps(r)} for r in replies]}


def test_a_function_call_is_one_job_retried_until_valid(cw: Client) -> None:
    classify = cw.function(
        "Classify the sentiment.", result=Sentiment, metadata=scripted({"label": "x"}, VALID)
    )
    assert classify({"text": "I love it"}) == Sentiment(**VALID)


def test_a_function_whose_answers_stay_invalid_raises_job_failed(cw: Client) -> None:
    classify = cw.function(
        "Classify.", result=Sentiment, max_attempts=2, metadata=scripted("no", "[]")
    )
    with pytest.raises(JobFailed) as failed:
        classify("meh")
    job = cw.jobs.get(failed.value.job_id)
    assert job.status == "failed" and [a.n for a in job.attempts] == [1, 2]
    assert all(a.error for a in job.attempts)


def test_map_runs_one_batch_and_returns_results_in_order(cw: Client) -> None:
    classify = cw.function("Classify.", result=Sentiment, metadata=scripted(VALID))
    inputs = [{"text": f"review {i}"} for i in range(12)]
    assert classify.map(inputs) == [Sentiment(**VALID)] * 12


def test_the_async_function_and_map(api: Api, tenant_key: str) -> None:
    async def run() -> tuple[Sentiment, list[Sentiment]]:
        async with AsyncClient(api.base_url, tenant_key) as acw:
            fn = acw.function("Classify.", result=Sentiment, metadata=scripted(VALID))
            return await fn("one"), await fn.map(["a", "b", "c"])

    one, many = asyncio.run(run())
    assert one == Sentiment(**VALID) and many == [one] * 3


def test_batches_resource_pages_results_by_index(cw: Client) -> None:
    schema = Sentiment.model_json_schema()
    accepted = cw.batches.create("Classify.", schema, list(range(5)), metadata=scripted(VALID))
    assert accepted.count == 5
    wait_until(lambda: cw.batches.get(accepted.id).status == "completed", timeout=60)
    batch = cw.batches.get(accepted.id)
    assert batch.progress == 1.0 and batch.counts.get("succeeded") == 5
    first = cw.batches.results(accepted.id, offset=0, limit=3)
    rest = cw.batches.results(accepted.id, offset=first.next_offset, limit=3)
    assert [r.index for r in first.results + rest.results] == [0, 1, 2, 3, 4]
    assert rest.next_offset is None
    assert cw.jobs.get(first.results[0].job_id).batch_id == accepted.id


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    r = Receiver()
    url = r.start()
    yield r, url
    r.stop()


def test_webhooks_resource_creates_lists_shows_deliveries_and_deletes(
    cw: Client, receiver: tuple[Receiver, str]
) -> None:
    endpoint, url = receiver
    hook = cw.webhooks.create(url, ["job.completed"])
    assert hook.secret is not None and hook.secret.startswith("whsec_")
    endpoint.secret = hook.secret
    listed = cw.webhooks.list()
    assert [w.id for w in listed] == [hook.id] and listed[0].secret is None  # shown once
    cw.function("Classify.", result=Sentiment, metadata=scripted(VALID))("x")
    delivered = wait_until(endpoint.delivered, timeout=30, what="a verified delivery")
    assert [p["type"] for p in delivered.values()] == ["job.completed"]
    deliveries = wait_until(
        lambda: [d for d in cw.webhooks.deliveries(hook.id) if d.status == "succeeded"],
        timeout=30,
        what="the delivery recorded",
    )
    assert deliveries[0].event_type == "job.completed"
    assert deliveries[0].event_id in delivered and deliveries[0].attempts[0].status_code == 200
    cw.webhooks.delete(hook.id)
    assert cw.webhooks.list() == []
    with pytest.raises(NotFound):
        cw.webhooks.deliveries(hook.id)
