"""The dry run answers what a turn would do and cost, and stores, reserves and sends nothing."""

from __future__ import annotations

from budget_support import new_tenant
from sqlalchemy import text
from support import Api, Fakes

from cortex_workers.runtime import get_runtime


def _reservations(tenant_id: object) -> int:
    with get_runtime().engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM budget_reservations WHERE tenant_id = :t"),
                {"t": tenant_id},
            ).scalar_one()
        )


def test_a_dry_run_sends_nothing_and_its_maximum_covers_the_real_cost(
    api: Api, fakes: Fakes
) -> None:
    tenant_id, key = new_tenant({"daily_usd_limit_micros": 2_000_000})
    content = "plan this: what is the capital of France, and why? " * 20
    with api.as_tenant(key) as client:
        sid = client.create_session(provider="openai", model="gpt-4o")["id"]
        r = client.post_turn(sid, content, dry_run=True)
        assert r.status_code == 200, r.text
        plan = r.json()
        assert fakes.openai.requests_for(content) == []  # nothing sent
        assert _reservations(tenant_id) == 0  # nothing reserved
        assert client.messages(sid) == []  # nothing stored
        turn = client.wait_turn(client.submit(sid, content))  # the same turn, for real
    assert set(plan) == {"dry_run", "route", "estimate", "budget", "redactions"}
    assert plan["dry_run"] is True
    assert (plan["route"]["provider"], plan["route"]["model"]) == ("openai", "gpt-4o")
    estimate = plan["estimate"]
    assert set(estimate) == {
        "input_tokens",
        "max_output_tokens",
        "cost_usd_expected",
        "cost_usd_max",
    }
    assert set(plan["budget"]) == {"fits", "remaining_usd"}
    assert plan["budget"] == {"fits": True, "remaining_usd": 2.0}
    assert plan["redactions"] == {}
    assert turn["status"] == "done"
    assert len(fakes.openai.requests_for(content)) == 1
    assert 0 < turn["cost_usd"] <= estimate["cost_usd_max"]
    assert turn["usage"]["input_tokens"] <= estimate["input_tokens"]
    assert estimate["cost_usd_expected"] <= estimate["cost_usd_max"]


def test_a_dry_run_says_when_the_budget_would_not_fit(api: Api, fakes: Fakes) -> None:
    tenant_id, key = new_tenant({"daily_usd_limit_micros": 10_000})  # $0.01
    with api.as_tenant(key) as client:
        sid = client.create_session(provider="openai", model="gpt-4o")["id"]
        plan = client.post_turn(sid, "too dear", dry_run=True).json()
    assert plan["budget"] == {"fits": False, "remaining_usd": 0.01}
    assert plan["estimate"]["cost_usd_max"] > 0.01
    assert _reservations(tenant_id) == 0
