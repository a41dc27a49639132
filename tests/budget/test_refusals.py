"""A turn the budget cannot take is refused before anything is stored, with the documented
shapes: 402 `budget_exhausted`, 429 `user_rate_limited` (Retry-After), 409 `session_token_cap`;
and what `GET /v1/budget` and `GET /v1/usage` show."""

from __future__ import annotations

from budget_support import new_tenant
from support import Api

from cortex_workers.store.models import LlmMode


def _nothing_stored(client: Api, sid: str) -> None:
    session = client.http.get(f"/v1/sessions/{sid}").json()
    assert session["active_turn"] is None and session["queued_turns"] == 0
    assert client.messages(sid) == []


def test_a_turn_the_daily_budget_cannot_take_is_refused_402_before_anything_is_stored(
    api: Api,
) -> None:
    # one call of gpt-4o may cost 4096 output tokens at $10/M: more than $0.01
    _, key = new_tenant({"daily_usd_limit_micros": 10_000})
    with api.as_tenant(key) as client:
        sid = client.create_session(provider="openai", model="gpt-4o")["id"]
        r = client.post_turn(sid, "too dear")
        assert r.status_code == 402, r.text
        error = r.json()["error"]
        assert error["code"] == "budget_exhausted"
        assert set(error["details"]) == {"scope", "limit_usd", "spent_usd", "resets_at"}
        assert error["details"]["scope"] == "tenant"
        assert error["details"]["limit_usd"] == 0.01
        assert error["details"]["spent_usd"] == 0.0
        assert error["details"]["resets_at"].startswith("20")
        _nothing_stored(client, sid)


def test_an_end_user_over_the_hourly_limit_is_refused_429_with_retry_after(api: Api) -> None:
    _, key = new_tenant({"per_user_hourly_limit": 2})
    with api.as_tenant(key) as client:
        sid = client.scripted_session({"text": "one"}, {"text": "two"}, user="alice")
        for _ in range(2):
            client.wait_turn(client.submit(sid, "hello"))
        r = client.post_turn(sid, "a third")
        assert r.status_code == 429, r.text
        assert r.json()["error"]["code"] == "user_rate_limited"
        assert int(r.headers["Retry-After"]) >= 1
        assert r.json()["error"]["details"]["limit_per_hour"] == 2
        assert client.post_turn(sid, "another user", user="bob").status_code == 202


def test_a_session_over_its_token_cap_is_refused_409(api: Api) -> None:
    long = " ".join(["word"] * 400)
    _, probe_key = new_tenant()
    with api.as_tenant(probe_key) as probe:  # what one call of such a session holds
        psid = probe.scripted_session({"text": long}, tools=[])
        plan = probe.post_turn(psid, "hello", dry_run=True).json()["estimate"]
    cap = plan["input_tokens"] + plan["max_output_tokens"] + 300
    _, key = new_tenant({"session_token_cap": cap})
    with api.as_tenant(key) as client:
        sid = client.scripted_session({"text": long}, tools=[])
        first = client.wait_turn(client.submit(sid, "hello"))
        assert first["status"] == "done"  # it fit; its 400-word answer leaves too little
        r = client.post_turn(sid, "more")
        assert r.status_code == 409, r.text
        error = r.json()["error"]
        assert error["code"] == "session_token_cap"
        assert error["details"]["cap_tokens"] == cap
        assert error["details"]["used_tokens"] == (
            first["usage"]["input_tokens"] + first["usage"]["output_tokens"]
        )


def test_the_budget_and_usage_views_show_what_was_spent(api: Api) -> None:
    tenant_id, key = new_tenant({"daily_usd_limit_micros": 5_000_000, "mode": LlmMode.NORMAL})
    with api.as_tenant(key) as client:
        sid = client.create_session(provider="openai", model="gpt-4o", user="carol")["id"]
        turn = client.wait_turn(client.submit(sid, "what does it cost"))
        budget = client.http.get("/v1/budget").json()
        usage = client.http.get("/v1/usage", params={"group_by": "user"}).json()
        by_model = client.http.get("/v1/usage", params={"group_by": "model"}).json()
        by_day = client.http.get("/v1/usage", params={"group_by": "day"}).json()
        by_session = client.http.get("/v1/usage", params={"group_by": "session"}).json()
        period = {"from": "2000-01-01T00:00:00Z", "to": "2000-01-02T00:00:00Z"}
        before = client.http.get("/v1/usage", params=period).json()
        backwards = client.http.get("/v1/usage", params={"to": "2000-01-02T00:00:00Z"})
    tenant = next(s for s in budget["scopes"] if s["scope"] == "tenant")
    assert tenant["limit_usd"] == 5.0
    assert tenant["spent_usd"] == turn["cost_usd"] > 0
    assert tenant["reserved_usd"] == 0
    assert tenant["remaining_usd"] == round(5.0 - turn["cost_usd"], 6)
    assert tenant["alerted_at"] is None and tenant["resets_at"] == budget["resets_at"]
    assert budget["alert_at_pct"] == 80
    assert [(g["key"], g["calls"]) for g in usage["groups"]] == [("carol", 1)]
    assert usage["groups"][0]["cost_usd"] == turn["cost_usd"]
    assert usage["groups"][0]["input_tokens"] == turn["usage"]["input_tokens"]
    assert [g["key"] for g in by_model["groups"]] == ["openai:gpt-4o"]
    assert usage["total"]["output_tokens"] == turn["usage"]["output_tokens"]
    assert [g["key"] for g in by_day["groups"]] == [budget["day_start"][:10]]
    assert [g["key"] for g in by_session["groups"]] == [sid]
    assert before["groups"] == [] and before["total"]["calls"] == 0
    assert backwards.status_code == 422  # `to` before today's start
