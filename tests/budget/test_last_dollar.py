"""The last dollar: concurrent turns over many worker processes never spend past a limit, and
a call whose worker dies is settled at what it reserved."""

from __future__ import annotations

import random
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from budget_support import LlmWorkers, new_tenant
from sqlalchemy import text
from support import Api, Fakes, Workers, wait_until

from cortex_workers.runtime import get_runtime

pytestmark = pytest.mark.servers

RESERVED = 300_000  # µ$: 4096 output tokens of gpt-budget-test at most
PER_128_TOKENS = 9_375  # µ$: what 128 output tokens of gpt-budget-test cost
LIMIT = 1_000_000  # µ$: $1.00 a day
TURNS = 60


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
            text(
                "SELECT r.*, t.content FROM budget_reservations r JOIN turns t ON t.id = r.turn_id "
                "WHERE r.tenant_id = :t ORDER BY r.created_at"
            ),
            {"t": tenant_id},
        ).mappings()
        return [dict(r) for r in rows]


def test_sixty_concurrent_turns_on_five_workers_never_spend_past_one_dollar(
    api: Api, fakes: Fakes, llm_workers: LlmWorkers
) -> None:
    tenant_id, key = new_tenant({"daily_usd_limit_micros": LIMIT})
    rng = random.Random(19)
    run = uuid.uuid4().hex[:6]
    costs = {}  # scenario key -> what the fake bills when it answers it
    with api.as_tenant(key) as client:
        sessions = []
        for i in range(TURNS):
            content = f"last dollar {run} {i}"
            blocks = rng.randint(6, 32)  # 768..4096 output tokens: $0.05625..$0.30
            costs[content] = blocks * PER_128_TOKENS
            fakes.openai.enqueue(
                content,
                {"text": "fine", "usage": {"input": 12, "output": blocks * 128}, "delay_s": 0.4},
            )
            sid = client.create_session(provider="openai", model="gpt-budget-test")["id"]
            sessions.append((sid, content))
        with ThreadPoolExecutor(20) as pool:
            turn_ids = list(pool.map(lambda s: client.submit(s[0], s[1]), sessions))
        ended = [client.wait_turn(tid, timeout=120) for tid in turn_ids]
        refused = next(t for t in ended if t["status"] == "failed")
        errors = [e.data for e in client.turn_events(refused["id"]) if e.event == "error"]
        assert [e["code"] for e in errors] == ["budget_exhausted"]  # visible to the client
        timeline = client.http.get(f"/v1/turns/{refused['id']}/timeline").json()["timeline"]
        refusals = [e["data"] for e in timeline if e["kind"] == "budget"]
        assert refusals[-1]["action"] == "refused" and refusals[-1]["scope"] == "tenant"

    # a call whose step was taken over (a lapsed lease on a loaded machine) settles when it
    # notices, moments after its turn ended elsewhere: nothing may stay reserved once it has
    wait_until(lambda: _counter(f"tenant:{tenant_id}")[1] == 0, timeout=30, what="nothing reserved")
    spent, reserved = _counter(f"tenant:{tenant_id}")
    rows = _reservations(tenant_id)
    requested = [r.key for r in fakes.openai.requests if r.key in costs]
    assert spent <= LIMIT
    assert reserved == 0
    assert all(r["status"] == "settled" for r in rows)
    assert all(int(r["amount_micros"]) == RESERVED for r in rows)
    assert sum(int(r["cost_micros"]) for r in rows) == spent
    # one provider request per admitted reservation, and none without one
    assert sorted(requested) == sorted(r["content"] for r in rows)
    for r in rows:
        if r["settled_by"] == "call":  # the call finished: its real cost, to the micro-dollar
            assert int(r["cost_micros"]) == costs[r["content"]], r
        else:  # its step was taken over mid-call: the provider may have billed all it held
            assert r["settled_by"] in ("reconciler", "failure"), r
            assert int(r["cost_micros"]) == RESERVED, r
    # what the fake billed is what was settled, but for the calls taken over mid-call, which
    # were settled at what they held (the provider may have billed that much)
    billed = sum(costs[k] for k in requested)
    held_over = sum(RESERVED - costs[r["content"]] for r in rows if r["settled_by"] != "call")
    assert spent == billed + held_over
    done = [t for t in ended if t["status"] == "done"]
    failed = [t for t in ended if t["status"] == "failed"]
    assert {t["content"] for t in done} <= {r["content"] for r in rows}
    taken_over = any(r["settled_by"] != "call" for r in rows)
    assert len(done) >= 3 or (taken_over and done)  # a re-run may find the dollar spent
    assert len(done) + len(failed) == TURNS
    assert {t["error"]["code"] for t in failed} == {"budget_exhausted"}


def test_a_call_whose_worker_is_killed_is_settled_at_what_it_reserved(
    api: Api, fakes: Fakes, workers: Workers, llm_workers: LlmWorkers
) -> None:
    tenant_id, key = new_tenant({"daily_usd_limit_micros": LIMIT})
    content = f"killed mid-call {uuid.uuid4().hex[:6]}"
    fakes.openai.enqueue(
        content,
        {"text": "never read", "usage": {"output": 128}, "delay_s": 60},
        {"text": "second attempt", "usage": {"input": 10, "output": 256}},
    )
    with api.as_tenant(key) as client:
        sid = client.create_session(provider="openai", model="gpt-budget-test")["id"]
        tid = client.submit(sid, content)
        wait_until(lambda: fakes.openai.requests_for(content), timeout=30, what="the call")
        assert _counter(f"tenant:{tenant_id}") == (0, RESERVED)  # held while it runs
        llm_workers.kill_all()  # every process of the llm queue, whichever holds the call
        workers.kill("llm")
        workers.start("llm")
        turn = client.wait_turn(tid, timeout=90)
    assert turn["status"] == "done"
    assert turn["answer"] == "second attempt"
    first, second = _reservations(tenant_id)
    assert (first["attempt"], first["settled_by"]) == (1, "reconciler")
    assert first["cost_micros"] == first["amount_micros"] == RESERVED  # the provider may bill
    assert (second["settled_by"], second["cost_micros"]) == ("call", 2 * PER_128_TOKENS)
    assert _counter(f"tenant:{tenant_id}") == (RESERVED + 2 * PER_128_TOKENS, 0)
