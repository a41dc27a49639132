"""Interactive turns while a batch runs: POST→done of plain turns, one at a time, on an idle
stack and then while a batch of LLM-function jobs runs on the `batch` workers (docs/jobs.md).

The batch's jobs answer through the scripted model after `--batch-first-token-ms` (a model's
latency), so the batch keeps its workers busy for a while; the interactive turns run on the
`llm` worker as usual. The figure is the ratio of the two medians (the target: at most 2).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from .common import Bench, run
from .latency import PLAIN, _timed_turns
from .stack import WorkerSpec
from .stats import percentile, summary

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


async def _post_batch(b: Bench, size: int, first_token_ms: int) -> str:
    reply = {"text": '{"n": 1}', "first_token_ms": first_token_ms}
    body = {
        "instructions": "Return an object with n.",
        "result_schema": SCHEMA,
        "inputs": [{"n": i} for i in range(size)],
        "metadata": {"script": [reply]},
    }
    async with b.client(timeout=300) as http:
        r = await http.post("/v1/batches", json=body)
        if r.status_code != 202:
            raise RuntimeError(f"POST /v1/batches: {r.status_code} {r.text[:300]}")
        return str(r.json()["id"])


async def _batch_status(b: Bench, batch_id: str) -> dict[str, Any]:
    async with b.client() as http:
        return dict((await http.get(f"/v1/batches/{batch_id}")).json())


async def _turns_while_batch_runs(
    b: Bench, batch_id: str, n: int
) -> tuple[list[float], dict[str, Any]]:
    """Plain turns one at a time until the batch completes (at most `n`), and the batch."""
    samples: list[float] = []
    while len(samples) < n:
        status = await _batch_status(b, batch_id)
        if status["status"] == "completed":
            break
        got, _, _ = await _timed_turns(b, PLAIN, [], 3)  # the first of each trio warms up
        samples += got
    while (status := await _batch_status(b, batch_id))["status"] != "completed":
        await asyncio.sleep(0.5)
    return samples, status


def batch(b: Bench) -> None:
    a = b.args
    b.stack.run_worker("batch", WorkerSpec(pool="threads", concurrency=8), queues="batch")
    idle = b.figure(
        "batch_idle_p50", "POST→done, plain turn, idle, p50", "ms", higher_is_better=False
    )
    busy = b.figure(
        "batch_busy_p50",
        f"POST→done, plain turn, {a.batch_size}-job batch running, p50",
        "ms",
        higher_is_better=False,
    )
    ratio = b.figure(
        "batch_latency_ratio",
        "turn latency under a batch / idle",
        "×",
        target="≤ 2",
        higher_is_better=False,
    )
    rate = b.figure("batch_jobs_per_s", "batch jobs completed per second", "jobs/s")
    details: dict[str, Any] = {"batch_size": a.batch_size, "reps": []}
    for rep in range(a.reps):
        idle_samples, _, _ = run(_timed_turns(b, PLAIN, [], a.latency_n))
        started = time.monotonic()
        batch_id = run(_post_batch(b, a.batch_size, a.batch_first_token_ms))
        busy_samples, status = run(_turns_while_batch_runs(b, batch_id, a.latency_n))
        took = time.monotonic() - started
        idle.reps.append(percentile(idle_samples, 50))
        busy.reps.append(percentile(busy_samples, 50))
        ratio.reps.append(busy.reps[-1] / idle.reps[-1])
        rate.reps.append(a.batch_size / took)
        details["reps"].append(
            {"idle": summary(idle_samples), "busy": summary(busy_samples), "batch": status}
        )
        b.say(
            f"  rep {rep + 1}: idle p50 {idle.reps[-1]:.1f} ms, under the batch "
            f"p50 {busy.reps[-1]:.1f} ms ({len(busy_samples)} turns), batch {took:.1f} s"
        )
    ratio.reached = ratio.value <= 2.0
    b.details["batch"] = details
