"""A fired turn passes the admission of a posted one before it is stored: a tenant whose
daily budget cannot take it, or whose turns per minute are taken, gets no turn; the schedule
shows why (`last_error`) and goes on (real API, real beat and workers)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from budget_support import new_tenant
from support import Api, wait_until

from cortex_workers.api.ratelimit import turn_scope
from cortex_workers.providers.limits import Limit, RateLimiter
from cortex_workers.runtime import get_runtime
from cortex_workers.vocabulary import RateLimitKind

pytestmark = pytest.mark.servers


def _schedule_of(client: Api, sid: str) -> dict[str, Any]:
    [schedule] = client.http.get(f"/v1/sessions/{sid}/schedules").json()["schedules"]
    return dict(schedule)


def _refused(client: Api, sid: str, code: str, *, after: str | None = None) -> dict[str, Any]:
    """The schedule once a firing was refused with `code` (a refusal later than `after`)."""

    def refused() -> dict[str, Any] | None:
        schedule = _schedule_of(client, sid)
        error = schedule["last_error"]
        if error is None or (after is not None and _at(error["at"]) <= _at(after)):
            return None
        assert error["code"] == code, error
        return schedule

    return dict(wait_until(refused, timeout=30, interval=0.2, what=f"a {code} refusal"))


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _nothing_stored(client: Api, sid: str) -> None:
    session = client.http.get(f"/v1/sessions/{sid}").json()
    assert session["active_turn"] is None and session["queued_turns"] == 0
    assert client.messages(sid) == []


def test_a_firing_the_budget_cannot_take_stores_no_turn_and_the_schedule_goes_on(
    api: Api,
) -> None:
    # one call of gpt-4o may cost 4096 output tokens at $10/M: more than the $0.01 left
    _, key = new_tenant({"daily_usd_limit_micros": 10_000})
    with api.as_tenant(key) as client:
        sid = client.create_session(provider="openai", model="gpt-4o")["id"]
        r = client.http.post(f"/v1/sessions/{sid}/schedules", json={"content": "x", "every_s": 1})
        assert r.status_code == 201, r.text
        first = _refused(client, sid, "budget_exhausted")
        assert "budget" in first["last_error"]["message"]
        assert first["fired"] == 0 and first["last_turn_id"] is None
        # the schedule goes on: its next fire time is refused in turn
        later = _refused(client, sid, "budget_exhausted", after=first["last_error"]["at"])
        assert _at(later["next_run_at"]) > _at(first["next_run_at"]) and later["fired"] == 0
        _nothing_stored(client, sid)
        assert client.http.delete(f"/v1/schedules/{first['id']}").status_code == 204


def test_a_firing_over_the_tenant_s_turns_per_minute_stores_no_turn_and_waits(
    api: Api,
) -> None:
    tenant_id, key = new_tenant()
    per_minute = get_runtime().settings.tenant_turns_per_minute
    assert per_minute
    with api.as_tenant(key) as client:
        sid = client.create_session()["id"]
        # the tenant's window is full, as after `per_minute` posted turns
        grant = RateLimiter(get_runtime().redis, window_s=60.0).acquire(
            [Limit(turn_scope(tenant_id), RateLimitKind.RPM, per_minute, per_minute)]
        )
        assert grant.granted
        assert client.post_turn(sid, "one more").status_code == 429
        r = client.http.post(f"/v1/sessions/{sid}/schedules", json={"content": "x", "every_s": 1})
        assert r.status_code == 201, r.text
        schedule = _refused(client, sid, "rate_limited")
        assert schedule["fired"] == 0 and schedule["last_turn_id"] is None
        # it fires when the window allows (a later fire time), not at once again
        assert _at(schedule["next_run_at"]) > _at(schedule["last_error"]["at"])
        _nothing_stored(client, sid)
        assert client.http.delete(f"/v1/schedules/{schedule['id']}").status_code == 204
