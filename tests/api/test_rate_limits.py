"""Per-tenant submission limits: 429 in the error shape with `Retry-After`, per tenant, never
refusing an idempotent replay, off at 0, and a 503 (not a 500) when Redis is down.

The limits are lowered only for the duration of a test, on the in-process API's runtime, and
each test uses fresh tenants, so the rest of the suite runs with the defaults.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import redis
from support import Api, free_port

from cortex_workers.api.errors import RateLimited
from cortex_workers.api.ratelimit import session_scope, take_session, take_turn
from cortex_workers.keys import rate_key
from cortex_workers.runtime import get_runtime

SetLimits = Callable[..., None]


@pytest.fixture
def set_limits(monkeypatch: pytest.MonkeyPatch) -> SetLimits:
    """Replace settings of the in-process API's runtime until the test ends."""

    def apply(**values: Any) -> None:
        rt = get_runtime()
        monkeypatch.setattr(rt, "settings", rt.settings.model_copy(update=values))

    return apply


def assert_rate_limited(r: httpx.Response) -> int:
    """A 429 in the error shape whose `Retry-After` is whole seconds, at least 1, and equals
    `details.retry_after_s`; returns it."""
    assert r.status_code == 429, f"{r.request.method} {r.request.url}: {r.status_code} {r.text}"
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body = r.json()
    assert set(body) == {"error"}, body
    err = body["error"]
    assert err["code"] == "rate_limited", body
    assert isinstance(err["message"], str) and err["message"], body
    retry_after = r.headers.get("retry-after", "")
    assert retry_after.isdigit(), r.headers
    assert 1 <= int(retry_after) <= 60, retry_after
    assert err["details"]["retry_after_s"] == int(retry_after), body
    return int(retry_after)


def user_messages(client: Api, sid: str) -> list[str]:
    return [m["content"] for m in client.messages(sid) if m["role"] == "user"]


def test_turns_beyond_the_tenants_limit_are_429_with_retry_after_and_create_nothing(
    client: Api, set_limits: SetLimits
) -> None:
    set_limits(tenant_turns_per_minute=2)
    sid = client.scripted_session({"text": "one"}, {"text": "two"})
    accepted = [client.submit(sid, "first"), client.submit(sid, "second")]
    assert_rate_limited(client.post_turn(sid, "third"))
    assert_rate_limited(client.post_turn(sid, "fourth", if_busy="reject"))
    for tid in accepted:
        assert client.wait_turn(tid)["status"] == "done"
    assert user_messages(client, sid) == ["first", "second"]
    assert client.http.get(f"/v1/sessions/{sid}").json()["queued_turns"] == 0


def test_the_limit_is_per_tenant(client: Api, other_client: Api, set_limits: SetLimits) -> None:
    set_limits(tenant_turns_per_minute=1)
    sid = client.scripted_session({"text": "a"})
    other_sid = other_client.scripted_session({"text": "b"})
    tid = client.submit(sid, "mine")
    assert_rate_limited(client.post_turn(sid, "mine again"))
    other_tid = other_client.submit(other_sid, "theirs")  # the other tenant's window is its own
    assert client.wait_turn(tid)["answer"] == "a"
    assert other_client.wait_turn(other_tid)["answer"] == "b"


def test_an_idempotent_replay_is_answered_even_when_the_limit_is_reached(
    client: Api, set_limits: SetLimits
) -> None:
    set_limits(tenant_turns_per_minute=1)
    sid = client.scripted_session({"text": "once"})
    key = {"Idempotency-Key": f"replay-{uuid.uuid4()}"}
    first = client.post_turn(sid, "the question", headers=key)
    assert first.status_code == 202, first.text
    tid = first.json()["id"]
    assert_rate_limited(client.post_turn(sid, "a new question"))
    for _ in range(3):  # a client retrying after a lost answer gets the same turn every time
        again = client.post_turn(sid, "the question", headers=key)
        assert again.status_code == 202, again.text
        assert again.json()["id"] == tid
    # the same key with another body is still the 422 it always was, not a 429
    other = client.post_turn(sid, "another question", headers=key)
    assert other.status_code == 422 and other.json()["error"]["code"] == "idempotency_key_reused"
    # a new key is a new submission, and counts
    assert_rate_limited(client.post_turn(sid, "x", headers={"Idempotency-Key": str(uuid.uuid4())}))
    assert client.wait_turn(tid)["status"] == "done"
    assert user_messages(client, sid) == ["the question"]


def test_a_limit_of_zero_turns_the_limit_off(client: Api, set_limits: SetLimits) -> None:
    set_limits(tenant_turns_per_minute=1)
    sid = client.scripted_session({"text": "ok"})
    tids = [client.submit(sid, "first")]
    assert_rate_limited(client.post_turn(sid, "refused"))
    set_limits(tenant_turns_per_minute=0)
    tids += [client.submit(sid, f"unlimited {i}") for i in range(3)]
    set_limits(tenant_turns_per_minute=None)
    tids.append(client.submit(sid, "unlimited again"))
    for tid in tids:
        assert client.wait_turn(tid)["status"] == "done"
    assert len(user_messages(client, sid)) == 5


def test_redis_down_makes_a_submission_503_not_500(
    client: Api, set_limits: SetLimits, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_limits(tenant_turns_per_minute=5)
    sid = client.scripted_session({"text": "never"})
    dead = redis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=1)
    with monkeypatch.context() as patch:
        patch.setattr(get_runtime(), "redis", dead)  # nobody listens on that port
        r = client.post_turn(sid, "while redis is down")
    dead.close()
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] == "unavailable"
    assert r.headers.get("retry-after", "").isdigit()
    assert user_messages(client, sid) == []


def test_sessions_beyond_the_tenants_limit_are_429_with_retry_after(
    client: Api, set_limits: SetLimits
) -> None:
    set_limits(tenant_sessions_per_minute=1)
    client.create_session(name="the one")
    r = client.http.post("/v1/sessions", json={"name": "one too many"})
    assert_rate_limited(r)
    assert r.json()["error"]["details"]["limit_per_minute"] == 1
    # counted before the body is checked: a session that would be refused anyway is a 429 too
    assert_rate_limited(client.http.post("/v1/sessions", json={"provider": "no-such-provider"}))


def test_the_sessions_limit_refuses_beyond_its_count_per_tenant(set_limits: SetLimits) -> None:
    set_limits(tenant_sessions_per_minute=2)
    rt = get_runtime()
    tenant, other = uuid.uuid4(), uuid.uuid4()
    try:
        take_session(rt, tenant)
        take_session(rt, tenant)
        with pytest.raises(RateLimited) as refused:
            take_session(rt, tenant)
        assert refused.value.code == "rate_limited"
        assert refused.value.retry_after_s >= 1
        assert refused.value.details == {
            "retry_after_s": refused.value.retry_after_s,
            "limit_per_minute": 2,
        }
        take_session(rt, other)  # the other tenant's window is its own
        set_limits(tenant_sessions_per_minute=0)
        take_session(rt, tenant)
    finally:
        rt.redis.delete(*(rate_key(session_scope(t), "rpm") for t in (tenant, other)))


def test_an_unlimited_tenant_touches_no_redis(set_limits: SetLimits) -> None:
    set_limits(tenant_turns_per_minute=0, tenant_sessions_per_minute=0)
    rt = get_runtime()
    tenant = uuid.uuid4()
    take_turn(rt, tenant)
    take_session(rt, tenant)
    assert not rt.redis.keys(f"*{tenant}*")
