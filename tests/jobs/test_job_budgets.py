"""Budgets apply to every model call of a job, and so of a batch: each call reserves its
maximum cost before it is made and is settled to its real cost after it; a call that cannot
reserve ends its job `failed` with `budget_exhausted`; a job or batch whose smallest call does
not fit is refused 402 before anything is stored; a dead worker's reservation is settled at
the reserved amount by the reconciler."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from budget_support import new_tenant
from sqlalchemy import text
from support import Api, Fakes, wait_until

from cortex_workers.budget import day_window
from cortex_workers.runtime import get_runtime
from cortex_workers.store import jobs as job_store
from cortex_workers.store import settlement
from cortex_workers.store.budget import Reservation, ScopeLimit
from cortex_workers.store.db import transaction
from cortex_workers.store.job_budget import JobCallToReserve, reserve_job_call
from cortex_workers.store.jobs import JobSpec
from cortex_workers.store.settlement import Settlement
from cortex_workers.vocabulary import BudgetScope

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
RESERVED = 300_000  # µ$: 4096 output tokens of gpt-budget-test at most
COST = 30 * 9_375  # µ$: what 30 × 128 output tokens of gpt-budget-test cost
LIMIT = 1_000_000  # µ$: $1.00 a day, so three calls (3 × 0.28125) and no fourth
JOBS = 8


def _counter(key: str) -> tuple[int, int]:
    with get_runtime().engine.connect() as conn:
        row = conn.execute(
            text("SELECT sum(spent), sum(reserved) FROM budget_counters WHERE scope = :key"),
            {"key": key},
        ).one()
    return int(row[0] or 0), int(row[1] or 0)


def _reservations(tenant_id: uuid.UUID) -> list[dict[str, Any]]:
    with get_runtime().engine.connect() as conn:
        rows = conn.execute(
            text("SELECT * FROM budget_reservations WHERE tenant_id = :t ORDER BY created_at"),
            {"t": tenant_id},
        ).mappings()
        return [dict(r) for r in rows]


def _jobs_of(tenant_id: uuid.UUID) -> int:
    with get_runtime().engine.connect() as conn:
        query = text("SELECT count(*) FROM jobs WHERE tenant_id = :t")
        return int(conn.execute(query, {"t": tenant_id}).scalar_one())


def _batch_over_the_limit(client: Api, fakes: Fakes) -> tuple[str, set[str]]:
    run = uuid.uuid4().hex[:6]
    inputs = [f"job budget {run} {i}" for i in range(JOBS)]
    for i, prompt in enumerate(inputs):
        reply = {"text": json.dumps({"n": i}), "usage": {"input": 12, "output": 30 * 128}}
        fakes.openai.enqueue(prompt, {**reply, "delay_s": 0.2})
    body: dict[str, Any] = {"instructions": "Count.", "result_schema": SCHEMA, "inputs": inputs}
    body |= {"provider": "openai", "model": "gpt-budget-test", "max_attempts": 1}
    r = client.http.post("/v1/batches", json=body)
    assert r.status_code == 202, r.text
    return str(r.json()["id"]), set(inputs)


def test_a_batch_past_the_daily_limit_spends_at_most_the_limit_and_fails_the_rest(
    api: Api, fakes: Fakes
) -> None:
    tenant_id, key = new_tenant({"daily_usd_limit_micros": LIMIT})
    with api.as_tenant(key) as client:
        batch_id, prompts = _batch_over_the_limit(client, fakes)

        def completed() -> dict[str, Any] | None:
            batch = dict(client.http.get(f"/v1/batches/{batch_id}").json())
            return batch if batch["status"] == "completed" else None

        batch = wait_until(completed, timeout=30, interval=0.2, what="the batch to complete")
        page = client.http.get(f"/v1/batches/{batch_id}/results", params={"limit": 100}).json()
        failed = [r for r in page["results"] if r["status"] == "failed"]
        refused = client.http.get(f"/v1/jobs/{failed[0]['job_id']}").json()
        succeeded = [r for r in page["results"] if r["status"] == "succeeded"]
        paid = client.http.get(f"/v1/jobs/{succeeded[0]['job_id']}").json()
        again = client.http.post(
            "/v1/jobs",
            json={"instructions": "Count.", "input": "one more", "result_schema": SCHEMA}
            | {"provider": "openai", "model": "gpt-budget-test"},
        )
        more = client.http.post(
            "/v1/batches",
            json={"instructions": "Count.", "inputs": ["a", "b"], "result_schema": SCHEMA}
            | {"provider": "openai", "model": "gpt-budget-test"},
        )
        by_model = client.http.get("/v1/usage", params={"group_by": "model"}).json()
        by_session = client.http.get("/v1/usage", params={"group_by": "session"}).json()
        budget = client.http.get("/v1/budget").json()

    # three calls fit ($0.30 held each, $0.28125 spent each); every other job is refused
    assert batch["counts"] == {"queued": 0, "running": 0, "succeeded": 3, "failed": JOBS - 3}
    assert {r["error"]["code"] for r in failed} == {"budget_exhausted"}
    assert refused["status"] == "failed" and refused["attempts"] == []
    assert refused["error"]["code"] == "budget_exhausted"
    assert set(refused["error"]["details"]) == {"scope", "limit_usd", "spent_usd", "resets_at"}
    assert refused["error"]["details"]["scope"] == "tenant"
    assert paid["cost_usd"] == COST / 1e6

    spent, reserved = _counter(f"tenant:{tenant_id}")
    rows = _reservations(tenant_id)
    assert spent <= LIMIT and reserved == 0
    assert spent == 3 * COST
    assert len(rows) == 3 and all(r["status"] == "settled" for r in rows)
    assert all(r["job_id"] is not None and r["step_id"] is None for r in rows)
    assert all(r["amount_micros"] == RESERVED for r in rows)  # the whole maximum, held first
    assert sum(r["cost_micros"] for r in rows) == spent
    assert len([q for q in fakes.openai.requests if q.key in prompts]) == 3  # one per admitted

    # nothing fits any more: refused before anything is stored, with the turns' details
    for r in (again, more):
        assert r.status_code == 402, r.text
        error = r.json()["error"]
        assert error["code"] == "budget_exhausted"
        assert error["details"]["scope"] == "tenant"
        assert error["details"]["limit_usd"] == LIMIT / 1e6
        assert error["details"]["spent_usd"] == spent / 1e6
        assert error["details"]["resets_at"].startswith("20")
    assert _jobs_of(tenant_id) == JOBS

    # the jobs' calls are the tenant's usage and its budget's spend
    (group,) = by_model["groups"]
    assert (group["key"], group["calls"]) == ("openai:gpt-budget-test", 3)
    assert group["cost_usd"] == spent / 1e6 and group["output_tokens"] == 3 * 30 * 128
    assert [(g["key"], g["calls"]) for g in by_session["groups"]] == [("", 3)]
    tenant = next(s for s in budget["scopes"] if s["scope"] == "tenant")
    assert tenant["spent_usd"] == spent / 1e6 and tenant["reserved_usd"] == 0


def _running_job(tenant_id: uuid.UUID, *, lease_s: int) -> uuid.UUID:
    """A scripted job in its first run, whose lease ends in `lease_s` seconds (negative: it ran
    out, as when its worker died)."""
    script = {"script": [{"text": json.dumps({"n": 1})}]}
    spec = JobSpec("Count.", "one", SCHEMA, "scripted", None, 1, script)
    with transaction(get_runtime().db) as db:
        job_id = job_store.create_job(db, tenant_id, spec)
        db.execute(
            text(
                "UPDATE jobs SET status = 'running', attempt = 1, updated_at = now(), "
                "lease_until = now() + make_interval(secs => :lease) WHERE id = :id"
            ),
            {"id": job_id, "lease": lease_s},
        )
    return job_id


def _hold(tenant_id: uuid.UUID, job_id: uuid.UUID, amount: int) -> uuid.UUID:
    """Reserve call 1 of the job's run 1, as its worker does before the call."""
    day = day_window(datetime.now(UTC), "UTC")
    money = (
        ScopeLimit(BudgetScope.GLOBAL, "global", day, None),
        ScopeLimit(BudgetScope.TENANT, f"tenant:{tenant_id}", day, LIMIT),
    )
    call = JobCallToReserve(job_id, 1, 1, tenant_id, "openai", "gpt-budget-test", amount, 10, money)
    held = reserve_job_call(get_runtime().engine, call)
    assert isinstance(held, Reservation), held
    return held.id


def _reservation(reservation_id: uuid.UUID) -> dict[str, Any]:
    with get_runtime().engine.connect() as conn:
        query = text("SELECT * FROM budget_reservations WHERE id = :id")
        return dict(conn.execute(query, {"id": reservation_id}).mappings().one())


def test_a_dead_workers_job_call_is_settled_at_what_it_reserved_a_live_one_is_not(
    api: Api,
) -> None:
    tenant_id, _ = new_tenant({"daily_usd_limit_micros": LIMIT})
    dead = _hold(tenant_id, _running_job(tenant_id, lease_s=-5), 200_000)
    live = _hold(tenant_id, _running_job(tenant_id, lease_s=600), 300_000)
    assert _counter(f"tenant:{tenant_id}") == (0, 500_000)

    wait_until(
        lambda: _reservation(dead)["status"] == "settled",
        timeout=20,
        interval=0.2,
        what="the reconciler to settle the dead worker's call",
    )
    settled = _reservation(dead)
    assert settled["settled_by"] == "reconciler"
    assert settled["cost_micros"] == settled["amount_micros"] == 200_000  # it may be billed
    assert _reservation(live)["status"] == "reserved"  # its worker still holds the job
    assert _counter(f"tenant:{tenant_id}") == (200_000, 300_000)

    settlement.settle(get_runtime().engine, live, Settlement(75_000, 0, 1024), alert_at_pct=80)
    assert _counter(f"tenant:{tenant_id}") == (275_000, 0)
